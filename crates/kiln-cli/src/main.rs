//! The kiln command (being written).
fn main() {}
