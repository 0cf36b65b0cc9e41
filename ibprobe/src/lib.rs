//! ibprobe library.
