//! CuPy's `ElementwiseKernel` and `ReductionKernel` as a library: a kernel is declared from
//! parameter lists and a body in a subset of C, bound to argument types and shapes, then
//! either emitted as fused CUDA C++ source or evaluated on the CPU.
//!
//! Design: the body is parsed once ([`parse`]), type-checked per binding into a typed AST
//! where every C conversion is explicit ([`typed`]), and from that one tree the CUDA
//! generator ([`cuda`]) prints source and the CPU compiler ([`cpu`]) builds a register
//! program over chunks of 4096 lanes (one loop per instruction, so it vectorises), run in
//! parallel with rayon. Both paths compute in the same C types, so a GPU result can be
//! checked against the CPU one.
//!
//! Semantics follow CuPy: placeholder types (`T`) bound from array arguments, scalars
//! converted to their parameter's type, NumPy broadcasting, `raw` parameters indexed by the
//! body, `i` and `_ind.size()`; reductions start from `identity` (zero when none), combine
//! with `reduce_expr` over `a` and `b`, and finish with `post_map_expr`.
#![deny(missing_docs)]

mod cpu;
pub mod cuda;
mod cuda_complex;
mod cuda_reduction;
mod cuda_vector;
mod elementwise;
mod func;
mod lex;
mod params;
mod parse;
mod reduction;
mod typed;
mod types;

pub use cuda::{KernelParam, REDUCTION_BLOCK};
pub use cuda_vector::{VectorPlan, VECTOR_BLOCK};
pub use elementwise::{Arg, ElementwiseKernel};
pub use params::{broadcast_shapes, is_valid_kernel_name, parse_params, ArgSpec, Binding, Param, ParamType};
pub use reduction::{Axis, ReductionBinding, ReductionKernel};
pub use types::{c_strides, Element, HostArray, HostArrayMut, OwnedArray, Scalar, ScalarType};
