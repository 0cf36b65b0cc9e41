//! (issue 4: in progress)
