//! Every CSV the service writes: quoted by the `csv` crate, and every cell a spreadsheet
//! would run as a formula neutralised first (OWASP CSV injection), whatever column it is in.

use std::borrow::Cow;

/// The characters that make a spreadsheet read a cell as a formula.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// The cell as a spreadsheet shows it and never runs it: one that begins with `=`, `+`,
/// `-`, `@`, a tab or a carriage return gets a `'` in front (the text is otherwise kept).
pub fn neutralised(cell: &str) -> Cow<'_, str> {
    if cell.starts_with(FORMULA_STARTS) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// `header` and `rows` as CSV text, every cell neutralised and quoted where needed.
pub fn csv_text<Row, Cell>(header: &[&str], rows: impl IntoIterator<Item = Row>) -> String
where
    Row: IntoIterator<Item = Cell>,
    Cell: AsRef<str>,
{
    let mut writer = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    // Writing to memory cannot fail: the `csv` crate only reports the writer's IO errors.
    let _ = writer.write_record(header);
    for row in rows {
        let cells: Vec<String> = row
            .into_iter()
            .map(|cell| neutralised(cell.as_ref()).into_owned())
            .collect();
        let _ = writer.write_record(&cells);
    }
    let bytes = writer.into_inner().unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: [&str; 8] = [
        "=HYPERLINK(\"http://x\",\"click\")",
        "+SUM(1,2)",
        "-2+3",
        "@SUM(A1)",
        "\tcmd",
        "\r=1",
        "a,\"quoted\",\nvalue",
        "plain",
    ];

    /// A hostile value in every column comes back, read as CSV, as the same text behind a
    /// `'` where it would have run, and exactly as written elsewhere.
    #[test]
    fn no_cell_can_run_as_a_formula_in_any_column() {
        let header: Vec<String> = (0..HOSTILE.len()).map(|i| format!("c{i}")).collect();
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let rows: Vec<Vec<&str>> = (0..HOSTILE.len())
            .map(|shift| {
                (0..HOSTILE.len())
                    .map(|column| HOSTILE[(column + shift) % HOSTILE.len()])
                    .collect()
            })
            .collect();
        let text = csv_text(&header, rows.clone());
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let read: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(read.len(), rows.len(), "{text}");
        for (record, row) in read.iter().zip(&rows) {
            assert_eq!(record.len(), row.len());
            for (cell, original) in record.iter().zip(row) {
                assert!(!cell.starts_with(FORMULA_STARTS), "{cell:?} in {text}");
                assert_eq!(cell.trim_start_matches('\''), *original);
            }
        }
    }
}
