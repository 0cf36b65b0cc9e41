//! `probe::workload::slot`.

use ibprobe::probe::workload::slot::*;

#[test]
fn headers_records_and_control_slots_round_trip() {
    let mut b = [0u8; 64];
    let h = Header {
        len: 48,
        msgs: 2,
        flags: data_flags(Cause::Timer, false),
        word: u64::MAX - 3,
    };
    h.write(&mut b);
    assert_eq!(Header::read(&b), h);
    assert_eq!(Header::read(&b).cause(), Cause::Timer);
    assert_eq!(
        Header {
            flags: data_flags(Cause::Explicit, true),
            ..h
        }
        .cause(),
        Cause::Explicit
    );
    write_record(&mut b, 16, 7, 123_456);
    assert_eq!(read_record(&b, 16), (7, 123_456));
    let n = write_ctrl(&mut b, CREDIT | ACK, 10, 9);
    assert_eq!(n, CTRL_LEN);
    let c = Header::read(&b);
    assert_eq!((c.flags, c.word, ctrl_second(&b)), (CREDIT | ACK, 10, 9));
}
