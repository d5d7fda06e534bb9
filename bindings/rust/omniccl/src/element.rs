//! [`Element`]: the element types a buffer may hold.

use omniccl_sys as sys;

mod sealed {
    /// Only this crate implements `Element`: the library must know the type.
    pub trait Sealed {}
}

/// A type OmniCCL can send and reduce: `i8 i16 i32 i64 u8 u16 u32 u64 f32
/// f64 bool`, [`half::f16`], [`half::bf16`] and the complex numbers
/// [`num_complex::Complex32`] and [`num_complex::Complex64`]. Sealed: the
/// library must know every type's layout and how to reduce it.
///
/// Which reduce ops apply follows the C library: bitwise ops on integers and
/// `bool` only; on `bool`, `Sum`/`Max`/`BitOr` are logical or and
/// `Prod`/`Min`/`BitAnd` logical and (results are always 0 or 1); on complex
/// numbers `Sum`, `Prod` (complex multiplication), `Avg` and `PremulSum`
/// (`Min`/`Max` have no order to follow).
///
/// ```
/// use omniccl::Element;
/// fn bits<T: Element>() -> u8 { T::DTYPE.bits }
/// assert_eq!(bits::<half::bf16>(), 16);
/// assert_eq!(bits::<bool>(), 8);
/// ```
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The DLPack type (code, bits, one lane) of this element.
    const DTYPE: sys::DLDataType;
}

macro_rules! element {
    ($($t:ty => $code:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: sys::DLDataType = sys::DLDataType {
                code: $code as u8,
                bits: (8 * std::mem::size_of::<$t>()) as u8,
                lanes: 1,
            };
        }
    )*};
}

element! {
    i8 => sys::kDLInt, i16 => sys::kDLInt, i32 => sys::kDLInt, i64 => sys::kDLInt,
    u8 => sys::kDLUInt, u16 => sys::kDLUInt, u32 => sys::kDLUInt, u64 => sys::kDLUInt,
    f32 => sys::kDLFloat, f64 => sys::kDLFloat, half::f16 => sys::kDLFloat,
    half::bf16 => sys::kDLBfloat, bool => sys::kDLBool,
    num_complex::Complex32 => sys::kDLComplex, num_complex::Complex64 => sys::kDLComplex,
}
