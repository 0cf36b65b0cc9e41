//! `counters::sched`.

use ibnoise::counters::sched::*;

#[test]
fn the_count_is_read_from_its_line_and_nowhere_else() {
    let text = "cat (31020, #threads: 1)\n\
                -------------------------------------------------------------------\n\
                se.exec_start                                :      67514859.389153\n\
                se.nr_migrations                             :                   17\n\
                nr_switches                                  :                   40\n";
    assert_eq!(nr_migrations(text), Some(17));
    assert_eq!(nr_migrations("nr_switches : 40\n"), None);
    assert_eq!(nr_migrations("se.nr_migrations : many\n"), None);
}
