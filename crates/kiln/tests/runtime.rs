//! Backend selection.

use kiln::{BackendKind, Config, DeviceRequest, Runtime};

#[test]
fn cpu_request_is_always_the_cpu() {
    let rt = Runtime::new(DeviceRequest::Cpu, &Config::default()).unwrap();
    assert_eq!(rt.kind(), BackendKind::Cpu);
    assert!(rt.fallback_reason().is_none());
}

#[test]
fn auto_never_fails_and_explains_a_fallback() {
    let rt = Runtime::new(DeviceRequest::Auto, &Config::default()).unwrap();
    match rt.kind() {
        BackendKind::Cpu => assert!(rt.fallback_reason().is_some()),
        BackendKind::Cuda => assert!(rt.fallback_reason().is_none()),
    }
}

#[test]
fn cuda_with_an_empty_allow_list_is_refused_and_auto_falls_back() {
    let mut cfg = Config::default();
    cfg.devices.allowed = Some(vec![]);
    let e = Runtime::new(DeviceRequest::Cuda(None), &cfg).unwrap_err();
    assert!(matches!(e, kiln::Error::NoDevice(_)), "{e}");
    let rt = Runtime::new(DeviceRequest::Auto, &cfg).unwrap();
    assert_eq!(rt.kind(), BackendKind::Cpu);
    assert!(rt.fallback_reason().unwrap().contains("CUDA device"));
}

#[test]
fn nonexistent_ordinal_is_refused() {
    let e = Runtime::new(DeviceRequest::Cuda(Some(999)), &Config::default()).unwrap_err();
    assert!(matches!(e, kiln::Error::NoDevice(_)), "{e}");
}
