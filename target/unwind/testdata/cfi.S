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

/* The sigreturn trampoline's code: mov $15,%rax; syscall. */
	.globl fake_restore_rt
	.type fake_restore_rt, @function
	nop
fake_restore_rt:
	.byte 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05
	.size fake_restore_rt, .-fake_restore_rt
	.section .note.GNU-stack,"",@progbits
