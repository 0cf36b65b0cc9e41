//! What the verbs examples share: the flags that pick a verbs channel
//! (transport, message size, the library's verbs options) and how many
//! messages to send, and the spec they make, so each example says only
//! what it measures.

use clap::Args;
use ibprobe::cli::args::VerbsArgs;
use ibprobe::spec::{ChannelSpec, Transport};

/// The channel of a verbs example.
#[derive(Args, Debug)]
pub struct VerbsChannel {
    /// rc | uc | ud
    #[arg(long, default_value = "rc")]
    pub transport: String,
    /// Message size in bytes.
    #[arg(long, default_value_t = 32)]
    pub size: u32,
    /// Messages to send (verbs_pingpong: round trips).
    #[arg(long, default_value_t = 1000)]
    pub count: u64,
    #[command(flatten)]
    pub verbs: VerbsArgs,
}

impl VerbsChannel {
    /// The spec these flags ask for; exits 2 when `--transport` is not a
    /// verbs transport.
    pub fn spec(&self) -> ChannelSpec {
        let transport = match self.transport.parse::<Transport>() {
            Ok(t) if t.is_verbs() => t,
            _ => {
                eprintln!("error: --transport {}: rc | uc | ud", self.transport);
                std::process::exit(2)
            }
        };
        ChannelSpec {
            transport,
            size: self.size as usize,
            poll: self.verbs.poll,
            verbs: self.verbs.knobs(),
            model: None,
        }
    }
}
