//! [`HostBuf`]: the elements of a CPU tensor, in kiln's own `Vec` or in memory another
//! library owns (a NumPy array shared through DLPack), read the same way.

use bytemuck::Pod;
use std::sync::Arc;

/// Host memory another library owns, shared with a kiln tensor without a copy (a NumPy
/// array imported through DLPack). The implementor keeps the bytes alive, at one address and
/// aligned for the element type, for as long as it lives; the owner may still change their
/// values (DLPack shares memory: a write through NumPy is seen by the tensor).
pub trait ExternalHost: Send + Sync + std::fmt::Debug {
    /// The memory.
    fn bytes(&self) -> &[u8];
}

/// Elements of one type on the host: owned, or shared with another library.
pub struct HostBuf<T> {
    inner: Inner<T>,
}

enum Inner<T> {
    Owned(Vec<T>),
    Shared(Arc<dyn ExternalHost>),
}

impl<T: Pod> HostBuf<T> {
    /// Elements in `memory`, or `None` when its bytes are not a whole number of aligned `T`s.
    pub fn shared(memory: Arc<dyn ExternalHost>) -> Option<Self> {
        bytemuck::try_cast_slice::<u8, T>(memory.bytes()).ok()?;
        Some(HostBuf {
            inner: Inner::Shared(memory),
        })
    }

    /// Whether the elements are another library's memory.
    pub fn is_shared(&self) -> bool {
        matches!(self.inner, Inner::Shared(_))
    }

    /// The elements as a vector (moved when owned, copied when shared).
    pub fn into_vec(self) -> Vec<T> {
        match self.inner {
            Inner::Owned(v) => v,
            Inner::Shared(m) => bytemuck::cast_slice::<u8, T>(m.bytes()).to_vec(),
        }
    }
}

impl<T: Pod> std::ops::Deref for HostBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.inner {
            Inner::Owned(v) => v,
            // checked whole and aligned in `shared`; the owner keeps the address fixed
            Inner::Shared(m) => bytemuck::cast_slice(m.bytes()),
        }
    }
}

impl<T> From<Vec<T>> for HostBuf<T> {
    fn from(v: Vec<T>) -> Self {
        HostBuf {
            inner: Inner::Owned(v),
        }
    }
}

impl<T: Clone> Clone for HostBuf<T> {
    /// Owned elements are copied; shared memory stays shared (one more holder of it).
    fn clone(&self) -> Self {
        HostBuf {
            inner: match &self.inner {
                Inner::Owned(v) => Inner::Owned(v.clone()),
                Inner::Shared(m) => Inner::Shared(m.clone()),
            },
        }
    }
}

impl<T: Pod + std::fmt::Debug> std::fmt::Debug for HostBuf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl<T: Pod + PartialEq> PartialEq for HostBuf<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Bytes(Vec<u64>);
    impl ExternalHost for Bytes {
        fn bytes(&self) -> &[u8] {
            bytemuck::cast_slice(&self.0)
        }
    }

    #[test]
    fn shared_memory_reads_in_place_and_clones_share_it() {
        let m: Arc<dyn ExternalHost> = Arc::new(Bytes(vec![0x3ff0_0000_0000_0000, 0]));
        let b = HostBuf::<f64>::shared(m.clone()).expect("aligned");
        assert_eq!(&*b, &[1.0, 0.0]);
        assert!(b.is_shared());
        let c = b.clone();
        assert_eq!(c.as_ptr(), b.as_ptr(), "a clone shares the memory");
        assert_eq!(c.into_vec(), vec![1.0, 0.0]);
        // 16 bytes are not a whole number of 12-byte [f32; 3] elements: refused
        assert!(HostBuf::<[f32; 3]>::shared(m).is_none());
    }

    #[test]
    fn owned_from_vec() {
        let b: HostBuf<u16> = vec![1, 2, 3].into();
        assert!(!b.is_shared());
        assert_eq!(b.len(), 3);
        assert_eq!(b.clone(), b);
    }
}
