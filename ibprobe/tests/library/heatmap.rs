//! `report::heatmap`.

use ibprobe::report::heatmap::*;

fn grid() -> Grid {
    Grid {
        title: "ibprobe sweep: shm one-way p50 [us]".into(),
        columns: vec!["back to back".into(), "1000/s".into()],
        rows: vec!["8".into(), "64".into(), "512".into()],
        values: vec![
            vec![Some(80), Some(95)],
            vec![Some(120), None],
            vec![Some(2_500), Some(3_000)],
        ],
        ..Grid::default()
    }
}

#[test]
fn cells_axes_and_labels_are_drawn() {
    let svg = render_svg(&grid()).unwrap();
    assert!(svg.starts_with("<svg"));
    for s in [
        X_DESC,
        Y_DESC,
        "back to back",
        "1000/s",
        "512",
        "0.080",
        "3.000",
        "n/a",
        "p50 [us]",
    ] {
        assert!(svg.contains(s), "missing {s:?}");
    }
}

#[test]
fn an_empty_grid_still_renders() {
    let g = Grid {
        title: "t".into(),
        ..Grid::default()
    };
    assert!(render_svg(&g).unwrap().contains("t: no samples"));
}
