# Prints every frame of every thread of gdb's current inferior, one line
# each, for target/unwind's tests:
#   @@THREAD <lwp>
#   @@FRAME <level> <type> <pc> <rsp> <rbp> <name>
# where type is gdb's frame type (normal, inline, tailcall, sigtramp, ...),
# pc, rsp and rbp are hex ("-" when gdb cannot tell) and name is what
# "bt" prints ("??" when gdb has none).
import gdb

TYPES = {
    gdb.NORMAL_FRAME: "normal",
    gdb.DUMMY_FRAME: "dummy",
    gdb.INLINE_FRAME: "inline",
    gdb.TAILCALL_FRAME: "tailcall",
    gdb.SIGTRAMP_FRAME: "sigtramp",
    gdb.ARCH_FRAME: "arch",
    gdb.SENTINEL_FRAME: "sentinel",
}


def reg(frame, name):
    try:
        v = frame.read_register(name)
        if v.is_optimized_out:
            return "-"
        return "%#x" % (int(v) & 0xFFFFFFFFFFFFFFFF)
    except gdb.error:
        return "-"


for th in sorted(gdb.selected_inferior().threads(), key=lambda t: t.num):
    th.switch()
    print("@@THREAD %d" % th.ptid[1])
    f = gdb.newest_frame()
    while f is not None:
        print("@@FRAME %d %s %#x %s %s %s" % (f.level(), TYPES.get(f.type(), "?"), f.pc(),
                                             reg(f, "rsp"), reg(f, "rbp"), f.name() or "??"))
        try:
            f = f.older()
        except gdb.error as e:
            print("@@STOP %s" % e)
            break
