//! Report and output formats (being built for issue 4).
