//! Host discovery: what the machine is, read through a [`HostRoot`].
//!
//! Why it exists: ibtune, ibprobe and ibexporter all need the same facts
//! (which CPUs are local to which HCA, where its IRQs are, which cgroup
//! mode is in use). One module per concern reads them; [`discover`] puts
//! them together into the typed [`Host`] model.

pub mod cpulist;
pub mod model;
pub mod root;

pub use cpulist::CpuSet;
pub use model::*;
pub use root::{HostIoError, HostResult, HostRoot};
