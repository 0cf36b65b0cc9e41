//! The encoders every collector writes its families with: read-at-scrape
//! gauges and counters through prometheus-client, with their labels.

use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

/// Labels of one sample, in order.
pub(crate) type Labels = Vec<(&'static str, String)>;

/// Encodes one gauge family from read-at-scrape values (skipped when it
/// has no samples; a sample without labels is written `name value`).
pub(crate) fn gauges<V: EncodeGaugeValue + Copy + std::fmt::Debug + Send + Sync>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: &[(Labels, V)],
) -> Result<(), std::fmt::Error>
where
    ConstGauge<V>: EncodeMetric,
{
    if samples.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    for (labels, v) in samples {
        if labels.is_empty() {
            m.encode_gauge(v)?;
        } else {
            ConstGauge::new(*v).encode(m.encode_family(labels)?)?;
        }
    }
    Ok(())
}

/// Encodes one counter family from read-at-scrape values (skipped when it
/// has no samples).
pub(crate) fn counters(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: &[(Labels, u64)],
) -> Result<(), std::fmt::Error> {
    if samples.is_empty() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, unit, MetricType::Counter)?;
    for (labels, v) in samples {
        ConstCounter::new(*v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}
