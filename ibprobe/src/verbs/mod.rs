//! Verbs transport: RC, UC and UD queue pairs over sideway +
//! rdma-mummy-sys, and device listing. (Being built for issue 4.)

pub mod args;
