use super::*;
use ScalarType::*;

fn sig(src: &str, name: &str) -> Vec<ParamType> {
    match kernels(src).remove(name) {
        Some(Ok(s)) => s.params.into_iter().map(|p| p.ty).collect(),
        other => panic!("{name}: {other:?}"),
    }
}

fn why(src: &str, name: &str) -> String {
    match kernels(src).remove(name) {
        Some(Err(e)) => e,
        other => panic!("{name}: expected a parse error, got {other:?}"),
    }
}

#[test]
fn plain_and_qualified_pointers_and_scalars() {
    let src = r#"
        extern "C" __global__ void saxpy(const float* __restrict__ x, float *y, float a, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) y[i] = a * x[i] + y[i];
        }"#;
    assert_eq!(
        sig(src, "saxpy"),
        vec![
            ParamType::Pointer(Some(F32)),
            ParamType::Pointer(Some(F32)),
            ParamType::Scalar(F32),
            ParamType::Scalar(I32)
        ]
    );
    let s = kernels(src).remove("saxpy").unwrap().unwrap();
    assert_eq!(s.params[0].name.as_deref(), Some("x"));
    assert_eq!(s.params[3].name.as_deref(), Some("n"));
}

#[test]
fn every_numeric_spelling() {
    let src = r#"
    extern "C" __global__ void k(
        bool a, char b, signed char c, unsigned char d, short e, short int f, unsigned short g,
        int h, signed i, unsigned j, unsigned int k2, long l, long long m, unsigned long long n,
        long int o, unsigned long p, int8_t q, uint8_t r, int16_t s, uint16_t t, int32_t u,
        uint32_t v, int64_t w, uint64_t x, size_t y, ptrdiff_t z, __half h1, half h2,
        __nv_bfloat16 b1, nv_bfloat16 b2, float f1, double d1, const volatile double d2)
    {}"#;
    let want = vec![
        Bool, I8, I8, U8, I16, I16, U16, I32, I32, U32, U32, I64, I64, U64, I64, U64, I8, U8, I16, U16, I32,
        U32, I64, U64, U64, I64, F16, F16, BF16, BF16, F32, F64, F64,
    ];
    assert_eq!(
        sig(src, "k"),
        want.into_iter().map(ParamType::Scalar).collect::<Vec<_>>()
    );
}

#[test]
fn pointer_forms_void_arrays_and_unnamed_params() {
    let src = r#"
    // a comment mentioning __global__ void fake(int x)
    /* and a block one: __global__ void fake2(struct S s) */
    #define N 4
    #define LONG_MACRO(a) \
        __global__ void fake3(a)
    extern "C" __global__ void k(void* p, const void * __restrict__ q, float x[], double const* const r,
                                 __half*, unsigned char *img, float, uint16_t* __restrict__ out) {}
    extern "C" __global__ void none(void) {}
    extern "C" __global__ void empty() {}
    "#;
    assert_eq!(
        sig(src, "k"),
        vec![
            ParamType::Pointer(None),
            ParamType::Pointer(None),
            ParamType::Pointer(Some(F32)),
            ParamType::Pointer(Some(F64)),
            ParamType::Pointer(Some(F16)),
            ParamType::Pointer(Some(U8)),
            ParamType::Scalar(F32),
            ParamType::Pointer(Some(U16)),
        ]
    );
    assert!(sig(src, "none").is_empty());
    assert!(sig(src, "empty").is_empty());
    let all = kernels(src);
    assert_eq!(
        all.keys().collect::<Vec<_>>(),
        vec!["empty", "k", "none"],
        "comments and directives are skipped"
    );
}

#[test]
fn launch_bounds_extern_blocks_and_several_kernels() {
    let src = r#"
    extern "C" {
    __global__ void __launch_bounds__(256, 2) first(float* a, int n) { a[0] = n; }
    __global__ void
    second(double* b) { b[0] = 1.0; }
    }
    extern "C" __global__ __launch_bounds__(128) void third(unsigned n) {}
    static __device__ float helper(float x) { return x; }
    "#;
    assert_eq!(
        sig(src, "first"),
        vec![ParamType::Pointer(Some(F32)), ParamType::Scalar(I32)]
    );
    assert_eq!(sig(src, "second"), vec![ParamType::Pointer(Some(F64))]);
    assert_eq!(sig(src, "third"), vec![ParamType::Scalar(U32)]);
    assert!(!kernels(src).contains_key("helper"));
}

#[test]
fn what_cannot_be_parsed_says_why() {
    let src = r#"
    struct P { float a; int b; };
    template <typename T> __global__ void tmpl(T* x) {}
    extern "C" __global__ void by_struct(P p, float* y) {}
    extern "C" __global__ void by_vector(float4 v) {}
    extern "C" __global__ void by_ptr_ptr(float** v) {}
    extern "C" __global__ void by_ref(const int& n) {}
    extern "C" __global__ void by_long_double(long double v) {}
    extern "C" __global__ void by_void(void v) {}
    extern "C" __global__ void sized(float v[4]) {}
    extern "C" __global__ void std_type(std::uint32_t v) {}
    "#;
    assert!(why(src, "tmpl").contains("template"), "{}", why(src, "tmpl"));
    let e = why(src, "by_struct");
    assert!(e.contains("parameter 1") && e.contains("`P`"), "{e}");
    assert!(why(src, "by_vector").contains("float4"));
    assert!(why(src, "by_ptr_ptr").contains("pointer to pointers"));
    assert!(why(src, "by_ref").contains("reference"));
    assert!(why(src, "by_long_double").contains("long double"));
    assert!(why(src, "by_void").contains("void"));
    assert!(why(src, "sized").contains("sized array"));
    assert!(why(src, "std_type").contains("qualified"));
}

#[test]
fn explicit_parameter_lists() {
    assert_eq!(
        parse_params("const float* x, int n")
            .unwrap()
            .iter()
            .map(|p| p.ty)
            .collect::<Vec<_>>(),
        vec![ParamType::Pointer(Some(F32)), ParamType::Scalar(I32)]
    );
    assert!(parse_params("").unwrap().is_empty());
    assert!(parse_params("void").unwrap().is_empty());
    assert!(parse_params("void k(float* x)")
        .unwrap_err()
        .contains("between the parentheses"));
    assert!(parse_params("float* x,").unwrap_err().contains("empty parameter"));
    assert!(parse_params("mystery x").unwrap_err().contains("mystery"));
}

#[test]
fn sizes_and_dtypes() {
    assert_eq!(ParamType::Pointer(None).size_bytes(), 8);
    assert_eq!(ParamType::Scalar(F16).size_bytes(), 2);
    assert_eq!(ParamType::Scalar(Bool).size_bytes(), 1);
    assert_eq!(F32.dtype(), Some(DType::F32));
    assert_eq!(I32.dtype(), None);
}

/// CuPy's `_test_source2`: a parameter list continued with a backslash at the line's end.
#[test]
fn backslash_continued_lines_are_one_line() {
    let src = "extern \"C\"{\n\n__global__ void test_sum(const float* x1, const float* x2, float* y, \\\n                         unsigned int N)\n{}\n\n__global__ void test_multiply(const float* x1, const float* x2, float* y, \\\r\n unsigned int N) {}\n}\n";
    let want = vec![
        ParamType::Pointer(Some(F32)),
        ParamType::Pointer(Some(F32)),
        ParamType::Pointer(Some(F32)),
        ParamType::Scalar(U32),
    ];
    assert_eq!(sig(src, "test_sum"), want);
    assert_eq!(sig(src, "test_multiply"), want);
}

#[test]
fn overloads_are_refused_and_a_repeated_declaration_is_one_kernel() {
    let src = r#"
    __global__ void twice(float* x, int n);
    __global__ void twice(float* y, int count) {}
    __global__ void over(float* x) {}
    __global__ void over(double* x) {}
    "#;
    assert_eq!(
        sig(src, "twice"),
        vec![ParamType::Pointer(Some(F32)), ParamType::Scalar(I32)]
    );
    assert_eq!(
        kernels(src)["twice"].as_ref().unwrap().params[1].name.as_deref(),
        Some("count")
    );
    assert!(why(src, "over").contains("overloads"), "{}", why(src, "over"));
}

/// Template kernels named by a name expression: type parameters given scalar types are
/// substituted; anything else is left to the driver's parameter sizes.
#[test]
fn template_instantiations_substitute_scalar_type_arguments() {
    let src = r#"
    #include <cupy/complex.cuh>
    template<typename T>
    __global__ void my_sqrt(T* input, int N) {}
    template <class A, typename B> __global__ void axpy(const A* x, B* y, A a, unsigned n) {}
    template<typename T, int N> __global__ void non_type(T* x) {}
    template<typename T, typename = typename std::enable_if<std::is_integral<T>::value>::type>
    __global__ void shift(T* a, int N) {}
    __global__ void my_func(double* input, int N) {}
    "#;
    let types = |e: &str| instantiate(src, e).map(|p| p.into_iter().map(|p| p.ty).collect::<Vec<_>>());
    assert_eq!(
        types("my_sqrt<int>"),
        Some(vec![ParamType::Pointer(Some(I32)), ParamType::Scalar(I32)])
    );
    assert_eq!(
        types("my_sqrt<unsigned int>"),
        Some(vec![ParamType::Pointer(Some(U32)), ParamType::Scalar(I32)])
    );
    assert_eq!(
        types("axpy<float, double>"),
        Some(vec![
            ParamType::Pointer(Some(F32)),
            ParamType::Pointer(Some(F64)),
            ParamType::Scalar(F32),
            ParamType::Scalar(U32)
        ])
    );
    for left in [
        "my_sqrt<complex<double>>",
        "my_sqrt<float *>",
        "my_sqrt<int, int>",
        "non_type<float, 3>",
        "shift<int>",
        "my_func",
        "ns::my_sqrt<int>",
        "missing<int>",
        "my_sqrt<>",
    ] {
        assert_eq!(types(left), None, "{left}");
    }
}
