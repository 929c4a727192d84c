//! kiln-io: reading and writing the files kiln's users have (PNG/TIFF images, NPY arrays,
//! NIfTI volumes, option CSVs). No backend and no HTTP here; formats in, host arrays out.
#![deny(missing_docs)]
