//! The JAAS login configuration file (`-Djava.security.auth.login.config`), as Java's
//! `sun.security.provider.ConfigFile` reads it: sections
//! `Name { ModuleClass Flag key=value ... ; ... };`, values bare words or double-quoted
//! strings, `//` and `/* */` comments. keel reads it for the `Server` section's
//! DigestLoginModule `user_NAME="password"` options (ZooKeeper's
//! SaslServerCallbackHandler).

/// One login module line of a section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The module's class name, e.g. `org.apache.zookeeper.server.auth.DigestLoginModule`.
    pub module: String,
    /// `required`, `requisite`, `sufficient` or `optional` (lower-cased).
    pub flag: String,
    /// The options in file order.
    pub options: Vec<(String, String)>,
}

/// A parsed JAAS file: its sections in file order (a later section of the same name
/// adds its entries to the earlier one, as ConfigFile does).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JaasConfig {
    pub sections: Vec<(String, Vec<Entry>)>,
}

/// Why a JAAS file does not parse (Java's ConfigFile throws an IOException, and
/// ZooKeeper then refuses to start).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("JAAS configuration, line {line}: {reason}")]
pub struct JaasError {
    pub line: usize,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Punct(char),
}

fn tokenize(text: &str) -> Result<Vec<(usize, Token)>, JaasError> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                    }
                    if last == '*' && c == '/' {
                        closed = true;
                        break;
                    }
                    last = c;
                }
                if !closed {
                    return Err(JaasError {
                        line,
                        reason: "unterminated comment".into(),
                    });
                }
            }
            '{' | '}' | ';' | '=' => out.push((line, Token::Punct(c))),
            '"' => {
                let start = line;
                let mut v = String::new();
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\\' => {
                            if let Some(e) = chars.next() {
                                v.push(e);
                            }
                        }
                        '\n' => {
                            line += 1;
                            v.push(c);
                        }
                        c => v.push(c),
                    }
                }
                if !closed {
                    return Err(JaasError {
                        line: start,
                        reason: "unterminated quoted string".into(),
                    });
                }
                out.push((start, Token::Quoted(v)));
            }
            c => {
                let mut w = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || matches!(n, '{' | '}' | ';' | '=' | '"') {
                        break;
                    }
                    w.push(n);
                    chars.next();
                }
                out.push((line, Token::Word(w)));
            }
        }
    }
    Ok(out)
}

impl JaasConfig {
    /// Parses a JAAS file's text.
    ///
    /// Errors: [`JaasError`] with the line of the first token that breaks the grammar
    /// (a missing `{`, `;` or `=`, a flag other than the four, an unterminated string).
    pub fn parse(text: &str) -> Result<JaasConfig, JaasError> {
        let tokens = tokenize(text)?;
        let mut config = JaasConfig::default();
        let mut i = 0;
        let last_line = tokens.last().map(|(l, _)| *l).unwrap_or(1);
        let err = |line: usize, reason: &str| JaasError {
            line,
            reason: reason.to_string(),
        };
        let at = |i: usize| tokens.get(i).map(|(l, t)| (*l, t));
        while let Some((line, t)) = at(i) {
            let Token::Word(name) = t else {
                return Err(err(line, "expected a login configuration name"));
            };
            if at(i + 1).map(|(_, t)| t) != Some(&Token::Punct('{')) {
                return Err(err(line, "expected '{' after the name"));
            }
            i += 2;
            let mut entries = Vec::new();
            loop {
                match at(i) {
                    Some((_, Token::Punct('}'))) => {
                        i += 1;
                        break;
                    }
                    Some((line, Token::Word(module))) => {
                        let flag = match at(i + 1) {
                            Some((_, Token::Word(f))) => f.to_ascii_lowercase(),
                            _ => return Err(err(line, "expected a control flag")),
                        };
                        if !matches!(
                            flag.as_str(),
                            "required" | "requisite" | "sufficient" | "optional"
                        ) {
                            return Err(err(line, "invalid control flag"));
                        }
                        i += 2;
                        let mut options = Vec::new();
                        loop {
                            match at(i) {
                                Some((_, Token::Punct(';'))) => {
                                    i += 1;
                                    break;
                                }
                                Some((line, Token::Word(key))) => {
                                    if at(i + 1).map(|(_, t)| t) != Some(&Token::Punct('=')) {
                                        return Err(err(line, "expected '=' after an option"));
                                    }
                                    let value = match at(i + 2) {
                                        Some((_, Token::Word(v) | Token::Quoted(v))) => v.clone(),
                                        _ => return Err(err(line, "expected an option value")),
                                    };
                                    options.push((key.clone(), value));
                                    i += 3;
                                }
                                Some((line, _)) => {
                                    return Err(err(line, "expected an option or ';'"))
                                }
                                None => return Err(err(last_line, "expected ';'")),
                            }
                        }
                        entries.push(Entry {
                            module: module.clone(),
                            flag,
                            options,
                        });
                    }
                    Some((line, _)) => return Err(err(line, "expected a login module or '}'")),
                    None => return Err(err(last_line, "expected '}'")),
                }
            }
            if at(i).map(|(_, t)| t) != Some(&Token::Punct(';')) {
                return Err(err(line, "expected ';' after '}'"));
            }
            i += 1;
            match config.sections.iter_mut().find(|(n, _)| n == name) {
                Some((_, existing)) => existing.extend(entries),
                None => config.sections.push((name.clone(), entries)),
            }
        }
        Ok(config)
    }

    /// The entries of section `name`, if the file has it.
    pub fn section(&self, name: &str) -> Option<&[Entry]> {
        self.sections
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, e)| e.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kazoo_harness_file() {
        let c = JaasConfig::parse(
            "\nServer {\n    org.apache.zookeeper.server.auth.DigestLoginModule required\n    \
             user_super=\"super_secret\"\n    user_jaasuser=\"jaas_password\";\n};",
        )
        .unwrap();
        let s = c.section("Server").unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].flag, "required");
        assert_eq!(
            s[0].options,
            vec![
                ("user_super".to_string(), "super_secret".to_string()),
                ("user_jaasuser".to_string(), "jaas_password".to_string())
            ]
        );
        assert!(c.section("Client").is_none());
    }

    #[test]
    fn comments_several_sections_and_errors() {
        let c = JaasConfig::parse(
            "// c\nClient { a.B optional username=\"u\" password=p; };\n/* x\n */ Server { \
             m.D REQUIRED user_a=\"b \\\"q\\\"\"; };",
        )
        .unwrap();
        assert_eq!(c.section("Server").unwrap()[0].options[0].1, "b \"q\"");
        assert_eq!(c.section("Client").unwrap()[0].options[1].1, "p");
        assert!(JaasConfig::parse("").unwrap().sections.is_empty());
        assert_eq!(
            JaasConfig::parse("Server {\n m.D bogus;\n};")
                .unwrap_err()
                .line,
            2
        );
        assert!(JaasConfig::parse("Server { m.D required user_a=\"b\" }").is_err());
        assert!(JaasConfig::parse("Server { m.D required user_a=\"b; };").is_err());
        assert!(JaasConfig::parse("Server { m.D required user_a; };").is_err());
    }
}
