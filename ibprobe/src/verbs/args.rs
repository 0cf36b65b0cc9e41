//! The verbs knobs as command-line options, shared by `loopback`,
//! `server` and `client` (flattened into each by the CLI).

use clap::Args;

/// Verbs options. `--transport rc|uc|ud` itself is the CLI's (it also
/// selects the shm and udp reference transports).
#[derive(Args, Clone, Debug)]
pub struct VerbsArgs {
    /// RDMA device, e.g. mlx5_0 or rxe0 (default: the first with an active port).
    #[arg(long)]
    pub dev: Option<String>,
    /// Second device for one-way loopback across two devices or ports.
    #[arg(long)]
    pub peer_dev: Option<String>,
    /// Port number on the device.
    #[arg(long, default_value_t = 1)]
    pub port: u8,
    /// GID index (RoCE v2 needs one; default: the IPv4-mapped RoCE v2 GID, printed).
    #[arg(long)]
    pub gid_index: Option<u32>,
    /// Operation: send | send-imm | write-imm | write (write polls the last byte, as ib_write_lat).
    #[arg(long, default_value = "send")]
    pub op: String,
    /// Inline data: auto (up to the device's max inline) | off | N bytes.
    #[arg(long, default_value = "auto")]
    pub inline: String,
    /// Signal every send, every Nth, or auto (SQ depth / 2, the thesis's best).
    #[arg(long, default_value = "every")]
    pub signal: String,
    /// Completion polling: busy | event (completion channel).
    #[arg(long, default_value = "busy")]
    pub poll: String,
    /// Send queue depth.
    #[arg(long, default_value_t = 128)]
    pub sq_depth: u32,
    /// Receive queue depth.
    #[arg(long, default_value_t = 128)]
    pub rq_depth: u32,
    /// Receives pre-posted before the run (default: the RQ depth).
    #[arg(long)]
    pub rq_prepost: Option<u32>,
    /// Path MTU: 256 | 512 | 1024 | 2048 | 4096 (default: the port's active MTU).
    #[arg(long)]
    pub mtu: Option<u32>,
    /// Put the message buffers in huge pages (reserve them first in /proc/sys/vm/nr_hugepages).
    #[arg(long)]
    pub hugepages: bool,
}
