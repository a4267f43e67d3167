//! The CPU engine's choice of vector code at run time, made in one place: a loop written once
//! as an `#[inline(always)]` function is compiled a second time with wider vector instructions
//! (AVX2, and FMA where asked), and each call takes that copy where this CPU has them (the build
//! targets baseline x86-64). realfft and rustfft choose their own SIMD the same way.

/// `with_cpu_features!("avx2" ["avx2"] each<T: Sample>(a: &mut [T], b: &[T]))` calls
/// `each(a, b)`: compiled with the features of the string where the CPU has every feature
/// listed in brackets (checked at run time), else as built. Use it as a function's whole body.
macro_rules! with_cpu_features {
    ($features:literal [$($detect:tt),+]
        $each:ident $(<$g:ident: $bound:path>)? ($($arg:ident: $ty:ty),* $(,)?)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = $features)]
            unsafe fn with_features$(<$g: $bound>)?($($arg: $ty),*) {
                $each($($arg),*)
            }
            if $(std::arch::is_x86_feature_detected!($detect))&&+ {
                // SAFETY: this CPU has every feature `with_features` is compiled for (checked
                // just above); it runs the same safe code as `$each`.
                return unsafe { with_features($($arg),*) };
            }
        }
        $each($($arg),*)
    }};
}

pub(crate) use with_cpu_features;
