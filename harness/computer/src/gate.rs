//! Approval gates: `allow | ask | deny` rules matched on the action and on what it touches.
//!
//! A rule matches when all of its conditions do (a rule without conditions matches every
//! action). Of all matching rules, deny beats ask beats allow; nothing matching means allow.
//! Rules see the element under the pointer (or the focused element for typing; on a
//! desktop, the window and its title), the navigation an action would cause, and the key
//! chords it presses.

use cordon_protocol::computer::{Action, Key};
use serde::{Deserialize, Serialize};

/// What a gate decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

/// A description of a page element, gathered by the backend.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ElementInfo {
    /// Lower-case tag name (`button`, `input`, `a`).
    pub tag: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Visible text, value of a button-like input, or aria-label; trimmed and shortened.
    #[serde(default)]
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autocomplete: Option<String>,
    /// The resolved `href` of the element or its closest link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(default)]
    pub editable: bool,
}

/// Words that make a button or link high-impact. Matched as word prefixes, so "Pay now" and
/// "Payment" match but "display" does not.
const RISKY_WORDS: &[&str] = &[
    "submit", "buy", "pay", "delete", "send", "transfer", "confirm", "purchase", "checkout",
    "order", "remove",
];

impl ElementInfo {
    pub fn new(tag: impl Into<String>) -> Self {
        Self {
            tag: tag.into(),
            ..Self::default()
        }
    }

    /// `button "Buy now"`, `input[type=password] name=pw`.
    pub fn describe(&self) -> String {
        let mut s = self.tag.clone();
        if let Some(t) = &self.input_type {
            s.push_str(&format!("[type={t}]"));
        }
        if let Some(r) = &self.role {
            s.push_str(&format!("[role={r}]"));
        }
        if let Some(n) = &self.name {
            s.push_str(&format!(" name={n}"));
        }
        if !self.text.is_empty() {
            s.push_str(&format!(" {:?}", self.text));
        }
        if let Some(h) = &self.href {
            s.push_str(&format!(" -> {h}"));
        }
        s
    }

    /// A file input (or a label for one): clicking it opens a file chooser.
    pub fn is_upload(&self) -> bool {
        self.tag == "input" && self.input_type.as_deref() == Some("file")
    }

    pub fn is_password(&self) -> bool {
        self.input_type.as_deref() == Some("password")
            || self
                .autocomplete
                .as_deref()
                .is_some_and(|a| a.contains("password"))
    }

    pub fn is_payment(&self) -> bool {
        let hay = |s: &Option<String>| {
            s.as_deref().is_some_and(|s| {
                let s = s.to_ascii_lowercase();
                ["cc-", "card", "cvc", "cvv", "iban", "ccnum", "expiry"]
                    .iter()
                    .any(|w| s.contains(w))
            })
        };
        self.tag == "input" && (hay(&self.autocomplete) || hay(&self.name))
    }

    fn is_actionable(&self) -> bool {
        matches!(self.tag.as_str(), "button" | "a")
            || matches!(
                self.input_type.as_deref(),
                Some("submit" | "button" | "image")
            )
            || matches!(
                self.role.as_deref(),
                Some("button" | "link" | "menuitem" | "tab")
            )
    }

    /// A button or link whose text or role says it commits something.
    pub fn is_risky(&self) -> bool {
        if !self.is_actionable() {
            return false;
        }
        if self.input_type.as_deref() == Some("submit") && self.text.is_empty() {
            return true;
        }
        let text = self.text.to_lowercase();
        text.split(|c: char| !c.is_alphanumeric())
            .any(|w| RISKY_WORDS.iter().any(|r| w.starts_with(r)))
    }

    fn is(&self, class: ElementClass) -> bool {
        match class {
            ElementClass::Password => self.is_password(),
            ElementClass::Payment => self.is_payment(),
            ElementClass::Risky => self.is_risky(),
            ElementClass::Editable => self.editable,
            ElementClass::Link => self.href.is_some(),
            ElementClass::Upload => self.is_upload(),
            ElementClass::Any => true,
        }
    }
}

/// Element classes a rule can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ElementClass {
    /// Password inputs.
    Password,
    /// Card, CVC, IBAN … inputs.
    Payment,
    /// Buttons/links saying submit, buy, pay, delete, send, transfer, confirm, …
    Risky,
    Editable,
    Link,
    /// File inputs: clicking one opens a file chooser (an upload).
    Upload,
    Any,
}

/// Navigation conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NavMatch {
    /// The action goes to an origin other than the current page's.
    NewOrigin,
    /// Any navigation (typed URL, back/forward, link).
    Any,
}

/// One rule. Absent conditions match anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Rule {
    pub name: String,
    pub decision: Decision,
    /// Action kinds (`click`, `type`, `key`, `navigate`, … see `Action::kind`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<String>,
    /// The element under the pointer (focused element for `type`/`key`) is any of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub element: Vec<ElementClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub navigation: Option<NavMatch>,
    /// Key chords (`ctrl+w`, `alt+F4`); `combo` matches any chord holding a modifier;
    /// `ctrl+alt+*` matches any chord holding those keys and at least one more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// The window under the pointer (the focused one for `type`/`key`) has a title
    /// containing any of these, case-insensitively (desktop sessions, whose backend
    /// describes windows as elements with tag `window`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub window_title: Vec<String>,
    /// Shown to the human who approves; defaults to a description of the match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Rule {
    pub fn new(name: impl Into<String>, decision: Decision) -> Self {
        Self {
            name: name.into(),
            decision,
            actions: Vec::new(),
            element: Vec::new(),
            navigation: None,
            keys: Vec::new(),
            window_title: Vec::new(),
            reason: None,
        }
    }

    pub fn actions(mut self, kinds: &[&str]) -> Self {
        self.actions = kinds.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    pub fn element(mut self, classes: &[ElementClass]) -> Self {
        self.element = classes.to_vec();
        self
    }

    pub fn navigation(mut self, m: NavMatch) -> Self {
        self.navigation = Some(m);
        self
    }

    pub fn keys(mut self, chords: &[&str]) -> Self {
        self.keys = chords.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    pub fn window_title(mut self, patterns: &[&str]) -> Self {
        self.window_title = patterns.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    fn matches(&self, cx: &GateContext<'_>) -> Option<String> {
        let mut why = Vec::new();
        if !self.actions.is_empty() {
            if !self.actions.iter().any(|a| a == cx.action.kind()) {
                return None;
            }
            why.push(format!("action {}", cx.action.kind()));
        }
        if !self.element.is_empty() {
            let el = cx.element?;
            let class = self.element.iter().find(|c| el.is(**c))?;
            why.push(format!("{class:?} element {}", el.describe()).to_lowercase());
        }
        if let Some(m) = self.navigation {
            let nav = cx.navigation.as_ref()?;
            if m == NavMatch::NewOrigin && !nav.new_origin {
                return None;
            }
            why.push(format!("navigation to {}", nav.to));
        }
        if !self.keys.is_empty() {
            let hit = cx.chords.iter().find(|chord| {
                self.keys.iter().any(|pat| {
                    if pat == "combo" {
                        chord.len() > 1 && chord.iter().any(Key::is_modifier)
                    } else if let Some(held) = pat.strip_suffix("+*") {
                        Key::parse_chord(held).is_ok_and(|p| holds(chord, &p))
                    } else {
                        Key::parse_chord(pat).is_ok_and(|p| same_chord(&p, chord))
                    }
                })
            })?;
            let names: Vec<&str> = hit.iter().map(Key::as_str).collect();
            why.push(format!("keys {}", names.join("+")));
        }
        if !self.window_title.is_empty() {
            let el = cx.element.filter(|e| e.tag == "window")?;
            let title = el.text.to_lowercase();
            self.window_title
                .iter()
                .find(|p| title.contains(&p.to_lowercase()))?;
            why.push(format!("window {:?}", el.text));
        }
        Some(why.join(", "))
    }
}

/// `chord` holds every key of `held` and at least one other key.
fn holds(chord: &[Key], held: &[Key]) -> bool {
    let lower = |k: &Key| k.as_str().to_lowercase();
    chord.len() > held.len()
        && held
            .iter()
            .all(|h| chord.iter().any(|c| lower(c) == lower(h)))
}

fn same_chord(a: &[Key], b: &[Key]) -> bool {
    let norm = |c: &[Key]| {
        let mut v: Vec<String> = c.iter().map(|k| k.as_str().to_lowercase()).collect();
        v.sort();
        v
    };
    norm(a) == norm(b)
}

/// Where an action would navigate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Navigation {
    pub to: String,
    pub new_origin: bool,
}

/// What a gate looks at for one action.
#[derive(Debug, Clone)]
pub struct GateContext<'a> {
    pub action: &'a Action,
    pub element: Option<&'a ElementInfo>,
    pub navigation: Option<Navigation>,
    pub chords: Vec<Vec<Key>>,
}

/// The outcome for one action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub decision: Decision,
    /// The deciding rule (none when nothing matched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<String>,
}

/// A rule set (the `--rules` file: `{"rules": [...]}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Rules {
    pub rules: Vec<Rule>,
}

impl Default for Rules {
    /// Ask before touching passwords, payment fields and committing buttons, and before
    /// leaving the current origin.
    fn default() -> Self {
        let touching = ["click", "mouse_down", "drag", "type", "key"];
        Self {
            rules: vec![
                Rule::new("password-field", Decision::Ask)
                    .actions(&touching)
                    .element(&[ElementClass::Password]),
                Rule::new("payment-field", Decision::Ask)
                    .actions(&touching)
                    .element(&[ElementClass::Payment]),
                Rule::new("high-impact-button", Decision::Ask)
                    .actions(&["click", "mouse_down", "type"])
                    .element(&[ElementClass::Risky]),
                Rule::new("file-upload", Decision::Ask)
                    .actions(&["click", "mouse_down"])
                    .element(&[ElementClass::Upload]),
                Rule::new("new-origin", Decision::Ask).navigation(NavMatch::NewOrigin),
            ],
        }
    }
}

impl Rules {
    /// No rules: everything is allowed.
    pub fn allow_all() -> Self {
        Self { rules: Vec::new() }
    }

    pub fn from_json(s: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(s)
    }

    /// Evaluates every rule; deny beats ask beats allow.
    pub fn evaluate(&self, cx: &GateContext<'_>) -> Verdict {
        let mut best: Option<(Decision, &Rule, String)> = None;
        for rule in &self.rules {
            if let Some(why) = rule.matches(cx)
                && best.as_ref().is_none_or(|(d, _, _)| rule.decision > *d)
            {
                best = Some((rule.decision, rule, why));
            }
        }
        let element = cx.element.map(ElementInfo::describe);
        match best {
            None => Verdict {
                decision: Decision::Allow,
                rule: None,
                reason: "no rule matched".into(),
                element,
            },
            Some((decision, rule, why)) => Verdict {
                decision,
                rule: Some(rule.name.clone()),
                reason: rule.reason.clone().unwrap_or(why),
                element,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use cordon_protocol::computer::{Button, Point};

    fn click() -> Action {
        Action::Click {
            at: Some(Point::new(1, 1)),
            button: Button::Left,
            count: 1,
            modifiers: vec![],
        }
    }

    fn button(text: &str) -> ElementInfo {
        ElementInfo {
            text: text.into(),
            ..ElementInfo::new("button")
        }
    }

    fn eval(rules: &Rules, action: &Action, el: Option<&ElementInfo>) -> Verdict {
        rules.evaluate(&GateContext {
            action,
            element: el,
            navigation: None,
            chords: vec![],
        })
    }

    #[test]
    fn risky_words_are_word_prefixes() {
        for t in [
            "Buy now",
            "Pay €10",
            "Delete account",
            "SEND",
            "Confirm transfer",
            "Payment",
        ] {
            assert!(button(t).is_risky(), "{t}");
        }
        for t in ["Display", "Open", "Resend"] {
            assert!(!button(t).is_risky(), "{t}");
        }
        // a div saying "Buy" is not a button
        assert!(
            !ElementInfo {
                text: "Buy".into(),
                ..ElementInfo::new("div")
            }
            .is_risky()
        );
        let role_button = ElementInfo {
            text: "Buy".into(),
            role: Some("button".into()),
            ..ElementInfo::new("div")
        };
        assert!(role_button.is_risky());
    }

    #[test]
    fn defaults_ask_for_password_and_risky_buttons() {
        let rules = Rules::default();
        let pw = ElementInfo {
            input_type: Some("password".into()),
            ..ElementInfo::new("input")
        };
        let v = eval(&rules, &click(), Some(&pw));
        assert_eq!(v.decision, Decision::Ask);
        assert_eq!(v.rule.as_deref(), Some("password-field"));
        assert_eq!(v.element.as_deref(), Some("input[type=password]"));
        let v = eval(&rules, &click(), Some(&button("Delete")));
        assert_eq!(v.rule.as_deref(), Some("high-impact-button"));
        assert!(
            v.reason.contains("risky element button \"delete\""),
            "{v:?}"
        );
        assert_eq!(
            eval(&rules, &click(), Some(&button("Open"))).decision,
            Decision::Allow
        );
        // hovering over a password field is not touching it
        let mv = Action::MouseMove {
            to: Point::new(1, 1),
            modifiers: vec![],
        };
        assert_eq!(eval(&rules, &mv, Some(&pw)).decision, Decision::Allow);
        // clicking a file input opens a file chooser: an upload
        let file = ElementInfo {
            input_type: Some("file".into()),
            ..ElementInfo::new("input")
        };
        let v = eval(&rules, &click(), Some(&file));
        assert_eq!(v.decision, Decision::Ask);
        assert_eq!(v.rule.as_deref(), Some("file-upload"));
    }

    #[test]
    fn deny_wins_over_ask_and_allow() {
        let mut rules = Rules::default();
        rules
            .rules
            .push(Rule::new("no-deletes", Decision::Deny).element(&[ElementClass::Risky]));
        rules
            .rules
            .push(Rule::new("fine", Decision::Allow).actions(&["click"]));
        let v = eval(&rules, &click(), Some(&button("Delete")));
        assert_eq!(
            (v.decision, v.rule.as_deref()),
            (Decision::Deny, Some("no-deletes"))
        );
    }

    #[test]
    fn window_titles_match_windows_only() {
        let rules = Rules {
            rules: vec![
                Rule::new("no-root-shell", Decision::Deny)
                    .actions(&["type", "key"])
                    .window_title(&["ROOT@"]),
            ],
        };
        let typing = Action::Type {
            text: "rm -rf /".into(),
            at: None,
            press_enter: None,
            clear_before: None,
        };
        let window = |title: &str| ElementInfo {
            text: title.into(),
            ..ElementInfo::new("window")
        };
        let v = eval(&rules, &typing, Some(&window("root@box: /home")));
        assert_eq!(v.decision, Decision::Deny);
        assert_eq!(v.reason, "action type, window \"root@box: /home\"");
        assert_eq!(
            eval(&rules, &typing, Some(&window("user@box"))).decision,
            Decision::Allow
        );
        // a page element with that text is not a window
        assert_eq!(
            eval(&rules, &typing, Some(&button("root@"))).decision,
            Decision::Allow
        );
        assert_eq!(eval(&rules, &typing, None).decision, Decision::Allow);
    }

    #[test]
    fn key_chords_and_navigation_match() {
        let rules: Rules = Rules::from_json(
            r#"{"rules": [
            {"name": "close-tab", "decision": "deny", "keys": ["ctrl+w"]},
            {"name": "combos", "decision": "ask", "keys": ["combo"]},
            {"name": "leave", "decision": "ask", "navigation": "new_origin"}
        ]}"#,
        )
        .unwrap();
        let key = |s: &str| {
            let chords = vec![Key::parse_chord(s).unwrap()];
            let action = Action::Key {
                chords: chords.clone(),
            };
            rules
                .evaluate(&GateContext {
                    action: &action,
                    element: None,
                    navigation: None,
                    chords,
                })
                .rule
        };
        assert_eq!(key("Control+W").as_deref(), Some("close-tab"));
        let wild = Rules::from_json(
            r#"{"rules": [{"name": "ctrl-alt", "decision": "ask", "keys": ["ctrl+alt+*"]}]}"#,
        )
        .unwrap();
        let hit = |s: &str| {
            let chords = vec![Key::parse_chord(s).unwrap()];
            let action = Action::Key {
                chords: chords.clone(),
            };
            wild.evaluate(&GateContext {
                action: &action,
                element: None,
                navigation: None,
                chords,
            })
            .decision
        };
        assert_eq!(hit("ctrl+alt+BackSpace"), Decision::Ask);
        assert_eq!(hit("alt+ctrl+shift+t"), Decision::Ask);
        assert_eq!(
            hit("ctrl+alt"),
            Decision::Allow,
            "nothing besides the held keys"
        );
        assert_eq!(hit("ctrl+t"), Decision::Allow);
        assert_eq!(key("ctrl+c").as_deref(), Some("combos"));
        assert_eq!(key("Return"), None);
        let nav = Action::Navigate { url: "x".into() };
        let v = rules.evaluate(&GateContext {
            action: &nav,
            element: None,
            navigation: Some(Navigation {
                to: "http://b.test/".into(),
                new_origin: true,
            }),
            chords: vec![],
        });
        assert_eq!(v.rule.as_deref(), Some("leave"));
    }
}
