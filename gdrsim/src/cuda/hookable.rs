//! Entry points that hooking libraries patch in place.
//!
//! UCX (and similar tools) install memory hooks by overwriting the first bytes of `cuMemAlloc`,
//! `cuMemFree` and the other allocation functions with a jump, after copying the overwritten
//! instructions to a trampoline. That only works when the function starts with ordinary
//! prologue instructions; the driver's own functions do. A Rust wrapper that forwards to
//! another exported function compiles to a lone `jmp *GOT(%rip)`, and a compiled function may
//! start with `sub $imm8,%rsp` or a register move, none of which UCX's patcher can relocate
//! when it needs 12 bytes (its hook more than 2 GiB away). [`hookable!`] defines an exported
//! function whose body is a fixed 13-byte frame prologue (`push %rbp; mov %rsp,%rbp; push
//! %rbx; push %r12..%r15`) followed by a call of its implementation, so that every such entry
//! point can be patched like the real driver's.

/// Defines the exported C function `$name`, which calls `$target` with the same arguments
/// (at most six, all in registers) and returns its result.
macro_rules! hookable {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $target:path) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            core::arch::naked_asm!(
                "push rbp",
                "mov rbp, rsp",
                "push rbx",
                "push r12",
                "push r13",
                "push r14",
                "push r15",
                // Six pushes after the return address: realign to 16 bytes for the call.
                "sub rsp, 8",
                "call {target}",
                "add rsp, 8",
                "pop r15",
                "pop r14",
                "pop r13",
                "pop r12",
                "pop rbx",
                "pop rbp",
                "ret",
                target = sym $target,
            )
        }

        $(#[$doc])*
        #[cfg(not(target_arch = "x86_64"))]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY: same contract as this function, passed through unchanged.
            unsafe { $target($($arg),*) }
        }
    };
}
pub(crate) use hookable;
