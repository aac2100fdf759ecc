//! Name patterns for allow/exclude lists: `*` matches any run of characters
//! (including none), `?` exactly one character; everything else is literal.

/// Whether `name` matches `pattern`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative wildcard match with single-star backtracking: O(|p|·|n|) worst case.
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Whether `name` matches any pattern of `list`.
pub fn matches_any<S: AsRef<str>>(list: &[S], name: &str) -> bool {
    list.iter().any(|p| matches(p.as_ref(), name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_star_and_question() {
        assert!(matches("alpha", "alpha"));
        assert!(!matches("alpha", "alphabet"));
        assert!(matches("alpha*", "alphabet"));
        assert!(matches("*", ""));
        assert!(matches("a*b*c", "axxbyyc"));
        assert!(!matches("a*b*c", "axxbyy"));
        assert!(matches("git?ub", "github"));
        assert!(!matches("git?ub", "gitub"));
        assert!(matches("*-server", "time-server"));
        assert!(!matches("", "x"));
        assert!(matches("", ""));
    }
}
