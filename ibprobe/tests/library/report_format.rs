//! `report::format`.

use ibprobe::report::format::*;

#[test]
fn format_names_parse_and_unknown_names_say_what_is_accepted() {
    assert_eq!("JSON".parse::<Format>(), Ok(Format::Json));
    assert_eq!("markdown".parse::<Format>(), Ok(Format::Markdown));
    let e = "xml".parse::<Format>().unwrap_err().0;
    assert!(e.contains("xml") && e.contains("perftest"), "{e}");
}

#[test]
fn the_words_stand_in_the_places_their_files_say() {
    // `--help` and every "use X or Y" list them in the PLACE order of
    // their files' `word!` lines (a new format may stand anywhere).
    let known = ["table", "json", "csv", "markdown", "perftest"];
    let listed: Vec<&str> = Format::ALL
        .iter()
        .map(|f| f.name())
        .filter(|n| known.contains(n))
        .collect();
    assert_eq!(listed, known);
    assert_eq!(
        Format::Perftest.help(),
        "perftest's (ib_send_lat) header and result line, for its parsers."
    );
}
