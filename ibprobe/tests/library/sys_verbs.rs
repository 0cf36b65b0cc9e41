//! `sys::mem::Region` as the HCA's buffers use it.

use ibprobe::sys::mem::{Placement, Region};

#[test]
fn a_pinned_buffer_is_whole_zeroed_pages() {
    let page = ibprobe::sys::mem::page_size();
    for (ask, want) in [(0, page), (1, page), (page, page), (page + 1, 2 * page)] {
        let b = Region::new(ask, &Placement::default()).unwrap();
        assert_eq!(b.len(), want, "asked {ask}");
        assert_eq!(b.addr() % page as u64, 0);
        assert!((0..want).step_by(page / 2).all(|o| b.read_u8(o) == 0));
        b.write_le(want - 8, 0x0102_0304_0506_0708, 8);
        assert_eq!(b.read_le(want - 8, 8), 0x0102_0304_0506_0708);
    }
}
