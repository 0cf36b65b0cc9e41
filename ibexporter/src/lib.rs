//! ibexporter library.
