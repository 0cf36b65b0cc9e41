//! Every `unsafe` of the crate lives under this module, one file per
//! foreign surface, each call with a SAFETY comment, so an audit reads
//! one folder. The rest of the crate calls the safe wrappers.

pub mod host;
pub mod mem;
pub mod rt;
pub mod tsc;
pub mod verbs;
