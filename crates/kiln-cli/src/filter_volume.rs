//! `kiln filter3d` on one volume: read (NIfTI or `.npy`, in f32 as kiln-io gives it),
//! filter on the device as a tensor, write. A 3-D volume's result is downloaded into the
//! input's own array (no new buffer); a 4-D one is filtered volume by volume along `t`.

use crate::filter_cmd::{for_each_item, invalid, io_error};
use crate::filter_kernel::Filter3;
use kiln::imaging::FilterPath;
use kiln::Runtime;
use kiln_io::{Format, IoError, Volume};
use ndarray::Axis;
use std::path::Path;

pub(crate) fn read_volume3(path: &Path) -> anyhow::Result<Volume> {
    let vol = kiln_io::read_volume(path).map_err(|e| match e {
        IoError::UnsupportedDimensionality { path, shape, .. } => invalid(
            "--input",
            format!(
                "{}: shape {shape:?} ({}-D) is not a volume; filter3d takes 3-D (x, y, z) or 4-D \
                 (x, y, z, t) data{}",
                path.display(),
                shape.len(),
                if shape.len() == 2 {
                    "; for 2-D images use kiln filter2d"
                } else {
                    ""
                }
            ),
        ),
        other => io_error("--input")(other).into(),
    })?;
    let shape = vol.data.shape();
    if shape.contains(&0) {
        return Err(invalid(
            "--input",
            format!(
                "{}: empty volume (shape {shape:?}); a volume must be at least 1x1x1",
                path.display()
            ),
        ));
    }
    Ok(vol)
}

/// The stored type's name for the summary (`f32` for `.npy`, which is read into f32).
pub(crate) fn volume_input_type(format: Format, vol: &Volume) -> String {
    match (format, vol.stored_dtype()) {
        (Format::Npy, _) | (_, None) => "f32".to_string(),
        (_, Some(t)) => format!("{t:?}").to_ascii_lowercase(),
    }
}

/// Filters a 3-D volume in one call, a 4-D one volume by volume along its last axis; the
/// result replaces the volume's data (header kept). Returns the volumes filtered.
pub(crate) fn filter_volume3(
    rt: &Runtime,
    mut vol: Volume,
    f: &Filter3,
    show_progress: bool,
) -> anyhow::Result<(Volume, usize)> {
    let p = FilterPath::Auto;
    let apply = |t: kiln::Tensor| -> kiln::Result<kiln::Tensor> {
        match *f {
            Filter3::Kernel(k, mode) => t.filter3d(k, mode, p),
            Filter3::Op(op) => op(&t),
        }
    };
    let s = vol.data.shape().to_vec();
    let dims = [s[0], s[1], s[2]];
    if s.len() == 3 {
        let data = vol
            .data
            .as_slice_mut()
            .ok_or_else(|| anyhow::anyhow!("internal: a volume not in standard layout"))?;
        let t = rt.tensor(data, &dims)?;
        apply(t)?.to_host_into(data)?;
        return Ok((vol, 1));
    }
    let t = s[3];
    let n: usize = dims.iter().product();
    let mut src = vec![0f32; n];
    let mut got = vec![0f32; n];
    let mut run = |i: usize| -> anyhow::Result<()> {
        for (d, v) in src.iter_mut().zip(vol.data.index_axis(Axis(3), i).iter()) {
            *d = *v;
        }
        apply(rt.tensor(&src, &dims)?)?.to_host_into(&mut got)?;
        let view = ndarray::ArrayView3::from_shape(dims, &got)?;
        vol.data.index_axis_mut(Axis(3), i).assign(&view);
        Ok(())
    };
    if show_progress {
        for_each_item(t, "volumes", run)?;
    } else {
        (0..t).try_for_each(&mut run)?;
    }
    Ok((vol, t))
}
