//! Text cut to a length for a message or a prompt, at a character boundary, an ellipsis marking
//! the cut: what an error quotes of a long line, what a prompt keeps of a lesson.

/// `text` cut to at most `limit` characters (trailing space before the cut dropped), `…` added
/// where it was cut.
pub fn cut(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((end, _)) => format!("{}…", text[..end].trim_end()),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn a_long_text_is_cut_at_a_character_boundary_and_says_so() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("exactly10!", 10), "exactly10!");
        assert_eq!(cut("ééééé is long", 3), "ééé…");
        assert_eq!(cut("two words", 4), "two…");
    }
}
