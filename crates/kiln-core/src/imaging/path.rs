//! Which algorithm a filter runs: the direct `k×k` (`k×k×k`) sum or the 1-D passes. Both
//! backends resolve the path here, so the CPU and the GPU always take the same one (and the
//! GPU gets the same 1-D factors the CPU uses).

use super::{BoundaryMode, Kernel2D, Kernel3D, Separable};
use crate::error::{Error, Result};

/// Which algorithm to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FilterPath {
    /// 1-D passes where the kernel allows it under the mode (see
    /// [`Kernel2D::separable_for`]), the direct sum otherwise.
    #[default]
    Auto,
    /// The direct `k×k` (`k×k×k`) sum: `scipy.ndimage.correlate` bit for bit, for any kernel.
    Direct,
    /// The 1-D passes; an error if the kernel is not separable under the mode.
    Separable,
}

/// The 1-D factors `path` resolves to for a kernel whose factors under `mode` are `sep`:
/// `Some` for the separable path, `None` for the direct one. `op` names the caller in
/// errors.
fn resolve(
    op: &str,
    name: &str,
    sep: Option<Separable>,
    path: FilterPath,
    mode: BoundaryMode,
) -> Result<Option<Separable>> {
    match (path, sep) {
        (FilterPath::Direct, _) => Ok(None),
        (_, Some(s)) => Ok(Some(s)),
        (FilterPath::Auto, None) => Ok(None),
        (FilterPath::Separable, None) => Err(Error::invalid(
            op,
            format!("kernel `{name}` is not separable under mode `{mode}`; use the direct path"),
        )),
    }
}

/// What a 2-D filter with `kernel` under `mode`, asked for `path`, runs: the 1-D factors
/// (`Some`, the separable path) or the direct sum (`None`). An error if `Separable` is
/// asked of a kernel that is not.
pub fn resolve_2d(kernel: &Kernel2D, mode: BoundaryMode, path: FilterPath) -> Result<Option<Separable>> {
    resolve("filter2d", kernel.name(), kernel.separable_for(mode), path, mode)
}

/// [`resolve_2d`] for a 3-D filter.
pub fn resolve_3d(kernel: &Kernel3D, mode: BoundaryMode, path: FilterPath) -> Result<Option<Separable>> {
    resolve("filter3d", kernel.name(), kernel.separable_for(mode), path, mode)
}

fn named(sep: Option<Separable>) -> FilterPath {
    if sep.is_some() {
        FilterPath::Separable
    } else {
        FilterPath::Direct
    }
}

/// The path a 2-D filter takes for `kernel` under `mode` when asked for `path`: `Direct` or
/// `Separable` (an error if `Separable` is asked of a kernel that is not).
pub fn path_2d(kernel: &Kernel2D, mode: BoundaryMode, path: FilterPath) -> Result<FilterPath> {
    resolve_2d(kernel, mode, path).map(named)
}

/// The path a 3-D filter takes; see [`path_2d`].
pub fn path_3d(kernel: &Kernel3D, mode: BoundaryMode, path: FilterPath) -> Result<FilterPath> {
    resolve_3d(kernel, mode, path).map(named)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_the_passes_where_the_kernel_allows_them() {
        let reflect = BoundaryMode::Reflect;
        let gauss = Kernel2D::preset("gaussian:2").unwrap();
        let cross = Kernel2D::preset("cross4").unwrap();
        assert_eq!(
            path_2d(&gauss, reflect, FilterPath::Auto).unwrap(),
            FilterPath::Separable
        );
        assert_eq!(
            path_2d(&gauss, reflect, FilterPath::Direct).unwrap(),
            FilterPath::Direct
        );
        assert_eq!(
            path_2d(&cross, reflect, FilterPath::Auto).unwrap(),
            FilterPath::Direct
        );
        let err = path_2d(&cross, reflect, FilterPath::Separable)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not separable") && err.contains("cross4"), "{err}");
        // the factors handed out are the kernel's own
        let sep = resolve_2d(&gauss, reflect, FilterPath::Auto).unwrap().unwrap();
        assert_eq!(Some(sep), gauss.separable_for(reflect));
        assert!(resolve_2d(&gauss, reflect, FilterPath::Direct).unwrap().is_none());

        let g3 = Kernel3D::preset("gaussian:0.5").unwrap();
        let lap = Kernel3D::preset("laplacian").unwrap();
        assert_eq!(
            path_3d(&g3, reflect, FilterPath::Auto).unwrap(),
            FilterPath::Separable
        );
        assert_eq!(
            path_3d(&lap, reflect, FilterPath::Auto).unwrap(),
            FilterPath::Direct
        );
        let err = path_3d(&lap, reflect, FilterPath::Separable)
            .unwrap_err()
            .to_string();
        assert!(err.contains("filter3d"), "{err}");
        assert_eq!(
            resolve_3d(&g3, reflect, FilterPath::Auto).unwrap(),
            g3.separable_for(reflect)
        );
    }
}
