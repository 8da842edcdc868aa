/*
 * cfi.S: functions with hand-written call frame information (and some
 * without any), for target/unwind's synthetic tests. Each NAME_pc label is
 * an address where the test places a frame; the comments say which rules
 * hold there. Built with gcc -shared -nostdlib.
 */
	.text

/* Every rule kind at fn_expr_pc:
 *   CFA = rsp + 16                 (DW_CFA_def_cfa_expression: breg7 16)
 *   rip at CFA - 8                 (DW_CFA_expression: lit8 minus)
 *   rbx = CFA + 32                 (DW_CFA_val_expression: plus_uconst 32)
 *   rbp = r12                      (DW_CFA_register)
 *   r13 at CFA - 16                (DW_CFA_offset)
 *   r14 undefined, r15 same value
 */
	.globl fn_expr, fn_expr_pc
	.type fn_expr, @function
fn_expr:
	.cfi_startproc
	nop
	.cfi_escape 0x0f, 0x02, 0x77, 0x10
	.cfi_escape 0x10, 0x10, 0x02, 0x38, 0x1c
	.cfi_escape 0x16, 0x03, 0x02, 0x23, 0x20
	.cfi_register %rbp, %r12
	.cfi_offset %r13, -16
	.cfi_undefined %r14
	.cfi_same_value %r15
fn_expr_pc:
	nop
	ret
	.cfi_endproc
	.size fn_expr, .-fn_expr

/* At fn_restore_pc rbp's rule was restored to the CIE's (none): the caller's
 * rbp is the callee's. CFA = rsp + 8. */
	.globl fn_restore, fn_restore_pc
	.type fn_restore, @function
fn_restore:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	pop %rbp
	.cfi_def_cfa_offset 8
	.cfi_restore %rbp
fn_restore_pc:
	ret
	.cfi_endproc
	.size fn_restore, .-fn_restore

/* The return address is undefined from the start: the outermost frame.
 * fn_outer_ret is a return address pointing after its first instruction. */
	.globl fn_outer, fn_outer_ret
	.type fn_outer, @function
fn_outer:
	.cfi_startproc
	.cfi_undefined %rip
	nop
fn_outer_ret:
	nop
	ret
	.cfi_endproc
	.size fn_outer, .-fn_outer

/* CFA = rsp + 0 at fn_noprogress_pc: the caller's rsp would not be above. */
	.globl fn_noprogress, fn_noprogress_pc
	.type fn_noprogress, @function
fn_noprogress:
	.cfi_startproc
	nop
	.cfi_def_cfa_offset 0
fn_noprogress_pc:
	ret
	.cfi_endproc
	.size fn_noprogress, .-fn_noprogress

/* An opcode delve's interpreter does not know (DW_CFA_GNU_window_save)
 * before fn_badcfi_pc. */
	.globl fn_badcfi, fn_badcfi_pc
	.type fn_badcfi, @function
fn_badcfi:
	.cfi_startproc
	nop
	.cfi_escape 0x2d
fn_badcfi_pc:
	ret
	.cfi_endproc
	.size fn_badcfi, .-fn_badcfi

/* The CFA is based on r13 at fn_cfa_r13_ret - 1. */
	.globl fn_cfa_r13, fn_cfa_r13_ret
	.type fn_cfa_r13, @function
fn_cfa_r13:
	.cfi_startproc
	.cfi_def_cfa %r13, 8
	nop
fn_cfa_r13_ret:
	ret
	.cfi_endproc
	.size fn_cfa_r13, .-fn_cfa_r13

/* No CFI: a standard frame-pointer prologue and epilogue. */
	.globl fn_fp, fn_fp_pushed, fn_fp_body, fn_fp_ret, fn_fp_after_call
	.type fn_fp, @function
fn_fp:
	push %rbp
fn_fp_pushed:
	mov %rsp, %rbp
fn_fp_body:
	call fn_fp
fn_fp_after_call:
	pop %rbp
fn_fp_ret:
	ret
	.size fn_fp, .-fn_fp

/* No CFI, with an endbr64 first: fn_ibt_pc is right after it. */
	.globl fn_ibt, fn_ibt_pc
	.type fn_ibt, @function
fn_ibt:
	.byte 0xf3, 0x0f, 0x1e, 0xfa
fn_ibt_pc:
	push %rbp
	mov %rsp, %rbp
	pop %rbp
	ret
	.size fn_ibt, .-fn_ibt

/* The shape of a thread asleep in glibc's futex wait (Debian 12: the
 * static __futex_abstimed_wait_common, reached from
 * __futex_abstimed_wait_cancelable64 by a jump). fn_waiter calls
 * fn_waitstub, which jumps to fn_waitcommon: a tail call, which pushes no
 * return address. fn_waitcommon sets up its frame and stops in a syscall.
 * At fn_waitcommon_pc, right after the syscall:
 *   CFA = rsp + 64, rip at CFA-8, rbp at CFA-16, rbx at CFA-24.
 * fn_waitstub_end, right after the jump, is where gdb shows the tail call
 * frame it reconstructs from DWARF call-site information
 * (DW_TAG_call_site with DW_AT_call_tail_call): no stack slot holds it.
 * fn_waiter's call is its last instruction, so its return address,
 * fn_waiter_ret, is the first byte of fn_after_waiter, whose CFI (the
 * return address undefined) must not be used for fn_waiter's frame. In
 * fn_waiter, CFA = rsp + 16 and rip at CFA-8.
 */
	.globl fn_waitcommon, fn_waitcommon_pc
	.type fn_waitcommon, @function
fn_waitcommon:
.Lwaitcommon:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	push %rbx
	.cfi_def_cfa_offset 24
	.cfi_offset %rbx, -24
	sub $0x28, %rsp
	.cfi_def_cfa_offset 64
	mov $0xca, %eax
	syscall
fn_waitcommon_pc:
	add $0x28, %rsp
	.cfi_def_cfa_offset 24
	pop %rbx
	.cfi_def_cfa_offset 16
	pop %rbp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size fn_waitcommon, .-fn_waitcommon

	.globl fn_waitstub, fn_waitstub_end
	.type fn_waitstub, @function
fn_waitstub:
.Lwaitstub:
	.cfi_startproc
	mov $1, %r9d
	jmp .Lwaitcommon
fn_waitstub_end:
	.cfi_endproc
	.size fn_waitstub, .-fn_waitstub

	.globl fn_waiter
	.type fn_waiter, @function
fn_waiter:
	.cfi_startproc
	sub $8, %rsp
	.cfi_def_cfa_offset 16
	call .Lwaitstub
	.cfi_endproc
	.size fn_waiter, .-fn_waiter

	.globl fn_after_waiter, fn_waiter_ret
	.type fn_after_waiter, @function
fn_after_waiter:
fn_waiter_ret:
	.cfi_startproc
	.cfi_undefined %rip
	nop
	ret
	.cfi_endproc
	.size fn_after_waiter, .-fn_after_waiter

/* The sigreturn trampoline's code: mov $15,%rax; syscall. */
	.globl fake_restore_rt
	.type fake_restore_rt, @function
	nop
fake_restore_rt:
	.byte 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05
	.size fake_restore_rt, .-fake_restore_rt
	.section .note.GNU-stack,"",@progbits
