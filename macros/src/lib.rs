//! Procedural macros of devtensor. One for now: [`fallible`], which writes
//! the `try_x`/`x` pair of an operation from one definition.
//!
//! It parses the function by hand, with `proc_macro` alone: the grammar it
//! needs is small, and `syn` would add a heavy build step to every clone.

use proc_macro::{Delimiter, Group, Ident, Punct, Spacing, Span, TokenStream, TokenTree};

/// Writes an operation's fallible and panicking forms from one function.
///
/// Put it on the panicking form `x`, whose body returns `Result<T>` even
/// though its signature says `T`. The macro emits:
///
/// - `try_x`, with the same signature, returning `crate::Result<T>`, and the
///   body as written;
/// - `x`, with `#[track_caller]`, the signature as written (so compiler
///   notes quote the lines users read) and the doc comment, whose body calls
///   `try_x` and panics with its error's message.
///
/// Without a `self` receiver the call is `Self::try_x(..)`; write
/// `#[fallible(free)]` on a free function to call `try_x(..)`. In a trait,
/// a declaration without a body declares `try_x` and provides `x`.
/// `#[fallible(try_x)]` checks the name, for macros whose rows spell it.
#[proc_macro_attribute]
pub fn fallible(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut free = false;
    let mut try_name = None;
    for token in attr {
        match token {
            TokenTree::Ident(word) if word.to_string() == "free" => free = true,
            TokenTree::Ident(name) if name.to_string().starts_with("try_") => try_name = Some(name),
            TokenTree::Punct(comma) if comma.as_char() == ',' => {}
            other => {
                return compile_error(
                    "expected `#[fallible]`, `#[fallible(free)]` or `#[fallible(try_x)]`",
                    other.span(),
                );
            }
        }
    }
    let function = match Function::parse(item) {
        Ok(function) => function,
        Err((message, span)) => return compile_error(message, span),
    };
    // A name given (by a macro's row, say) must be the one generated.
    if let Some(name) = try_name
        && name.to_string() != format!("try_{}", function.name)
    {
        return compile_error("the fallible form of `x` is named `try_x`", name.span());
    }
    function.expand(free)
}

/// A function item, split where the two forms differ.
struct Function {
    docs: Vec<TokenStream>,
    other_attrs: Vec<TokenStream>,
    /// Visibility and qualifiers, through the `fn` keyword.
    head: TokenStream,
    name: Ident,
    generics: Vec<TokenTree>,
    params: Group,
    output: Option<TokenStream>,
    where_clause: TokenStream,
    /// `None` for a trait method's declaration.
    body: Option<Group>,
}

type ParseError = (&'static str, Span);

impl Function {
    fn parse(item: TokenStream) -> Result<Function, ParseError> {
        let mut tokens = item.into_iter().peekable();
        let (mut docs, mut other_attrs) = (Vec::new(), Vec::new());
        while let Some(TokenTree::Punct(hash)) = tokens.peek()
            && hash.as_char() == '#'
        {
            let hash = tokens.next().unwrap();
            let Some(TokenTree::Group(group)) = tokens.next() else {
                return Err(("expected an attribute", hash.span()));
            };
            let first = group.stream().into_iter().next().map(|t| t.to_string());
            let attribute: TokenStream = [hash, TokenTree::Group(group)].into_iter().collect();
            match first.as_deref() {
                Some("doc") => docs.push(attribute),
                // Added to the panicking form, which is the one that panics.
                Some("track_caller") => {}
                _ => other_attrs.push(attribute),
            }
        }
        let mut head = TokenStream::new();
        loop {
            match tokens.next() {
                Some(TokenTree::Ident(word)) if word.to_string() == "fn" => {
                    head.extend([TokenTree::Ident(word)]);
                    break;
                }
                Some(token) => head.extend([token]),
                None => return Err(("#[fallible] goes on a function", Span::call_site())),
            }
        }
        let Some(TokenTree::Ident(name)) = tokens.next() else {
            return Err(("expected the function's name", Span::call_site()));
        };
        let mut generics = Vec::new();
        if matches!(tokens.peek(), Some(TokenTree::Punct(p)) if p.as_char() == '<') {
            let mut depth = 0usize;
            for token in tokens.by_ref() {
                depth = angle_depth(depth, &token, generics.last());
                generics.push(token);
                if depth == 0 {
                    break;
                }
            }
        }
        let Some(TokenTree::Group(params)) = tokens.next().filter(|t| is_group(t, Delimiter::Parenthesis)) else {
            return Err(("expected the parameter list", name.span()));
        };
        let mut rest: Vec<TokenTree> = tokens.collect();
        let body = match rest.pop() {
            Some(TokenTree::Group(body)) if body.delimiter() == Delimiter::Brace => Some(body),
            Some(TokenTree::Punct(semi)) if semi.as_char() == ';' => None,
            _ => return Err(("expected the function's body", name.span())),
        };
        let where_at = rest.iter().position(|t| matches!(t, TokenTree::Ident(w) if w.to_string() == "where"));
        let where_clause: TokenStream = rest.drain(where_at.unwrap_or(rest.len())..).collect();
        let output = match rest.as_slice() {
            [] => None,
            [TokenTree::Punct(dash), TokenTree::Punct(arrow), ty @ ..]
                if dash.as_char() == '-' && arrow.as_char() == '>' && !ty.is_empty() =>
            {
                Some(ty.iter().cloned().collect())
            }
            [first, ..] => return Err(("expected `-> Type`, `where` or the body", first.span())),
        };
        Ok(Function { docs, other_attrs, head, name, generics, params, output, where_clause, body })
    }

    fn expand(self, free: bool) -> TokenStream {
        let name = self.name.to_string();
        let try_name = Ident::new(&format!("try_{name}"), self.name.span());
        let params = split_top_level(self.params.stream());
        let receiver = params
            .first()
            .is_some_and(|p| p.iter().any(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "self")));
        let arguments: Vec<Ident> = params.iter().skip(usize::from(receiver)).filter_map(|p| binding(p)).collect();
        if arguments.len() + usize::from(receiver) != params.len() {
            return compile_error("#[fallible] needs each parameter to be a plain name", self.params.span());
        }

        let link = if free { format!("[`{name}`]") } else { format!("[`{name}`](Self::{name})") };
        let mut out = TokenStream::new();

        // try_x: the body as written, returning `crate::Result<T>`.
        let try_doc = format!(
            " Fallible form of {link}: returns the [`Error`](crate::Error) that `{name}` would panic with, \
             and on success the same value."
        );
        out.extend(doc(&try_doc));
        out.extend(self.other_attrs.iter().cloned());
        out.extend(self.head.clone());
        out.extend([TokenTree::Ident(try_name.clone())]);
        out.extend(self.generics.iter().cloned());
        out.extend([TokenTree::Group(self.params.clone())]);
        let ok_type = self.output.clone().unwrap_or_else(|| "()".parse().unwrap());
        out.extend("-> crate::Result<".parse::<TokenStream>().unwrap());
        out.extend(ok_type);
        out.extend(">".parse::<TokenStream>().unwrap());
        out.extend(self.where_clause.clone());
        out.extend([self.body.map_or_else(|| punct(';'), TokenTree::Group)]);

        // x: the signature as written, calling try_x.
        out.extend(self.docs.iter().cloned());
        out.extend(self.other_attrs.iter().cloned());
        out.extend("#[track_caller]".parse::<TokenStream>().unwrap());
        // scripts/check-fallible.py builds the crate with this cfg, so that
        // every call of a panicking form is a warning it can place: inside
        // a fallible body, such a call is the bug it looks for.
        let marker = format!(
            "#[cfg_attr(devtensor_check_fallible, deprecated(note = \"panicking form: a fallible body calls `try_{name}`\"))]"
        );
        out.extend(marker.parse::<TokenStream>().unwrap());
        out.extend(self.head);
        out.extend([TokenTree::Ident(self.name.clone())]);
        out.extend(self.generics.iter().cloned());
        // The parameters are only passed on: drop `mut` from their patterns.
        let mut passed = TokenStream::new();
        for param in &params {
            // `mut x: T` and `mut self`, not `&mut self`.
            let pattern_mut = matches!(&param[0], TokenTree::Ident(w) if w.to_string() == "mut");
            passed.extend(param[usize::from(pattern_mut)..].iter().cloned());
            passed.extend([punct(',')]);
        }
        let params = passed;
        out.extend([TokenTree::Group(Group::new(Delimiter::Parenthesis, params))]);
        if let Some(output) = self.output {
            out.extend("->".parse::<TokenStream>().unwrap());
            out.extend(output);
        }
        out.extend(self.where_clause);
        let mut call = TokenStream::new();
        if receiver {
            call.extend("self.".parse::<TokenStream>().unwrap());
        } else if !free {
            call.extend("Self::".parse::<TokenStream>().unwrap());
        }
        call.extend([TokenTree::Ident(try_name)]);
        let type_params = type_parameters(&self.generics);
        if !type_params.is_empty() {
            call.extend("::<".parse::<TokenStream>().unwrap());
            for param in type_params {
                call.extend([TokenTree::Ident(param), TokenTree::Punct(Punct::new(',', Spacing::Alone))]);
            }
            call.extend(">".parse::<TokenStream>().unwrap());
        }
        let mut args = TokenStream::new();
        for argument in arguments {
            args.extend([TokenTree::Ident(argument), TokenTree::Punct(Punct::new(',', Spacing::Alone))]);
        }
        call.extend([TokenTree::Group(Group::new(Delimiter::Parenthesis, args))]);
        let mut body = "crate::error::or_panic".parse::<TokenStream>().unwrap();
        body.extend([TokenTree::Group(Group::new(Delimiter::Parenthesis, call))]);
        out.extend([TokenTree::Group(Group::new(Delimiter::Brace, body))]);
        out
    }
}

fn is_group(token: &TokenTree, delimiter: Delimiter) -> bool {
    matches!(token, TokenTree::Group(g) if g.delimiter() == delimiter)
}

/// The `<`/`>` nesting after `token`; the `>` of `->` does not close.
fn angle_depth(depth: usize, token: &TokenTree, previous: Option<&TokenTree>) -> usize {
    let after_dash =
        matches!(previous, Some(TokenTree::Punct(p)) if p.as_char() == '-' && p.spacing() == Spacing::Joint);
    match token {
        TokenTree::Punct(p) if p.as_char() == '<' => depth + 1,
        TokenTree::Punct(p) if p.as_char() == '>' && !after_dash => depth.saturating_sub(1),
        _ => depth,
    }
}

/// `stream` split at its top-level commas (outside `<...>`).
fn split_top_level(stream: TokenStream) -> Vec<Vec<TokenTree>> {
    let mut parts = vec![Vec::new()];
    let mut depth = 0;
    let mut previous = None;
    for token in stream {
        depth = angle_depth(depth, &token, previous.as_ref());
        if depth == 0 && matches!(&token, TokenTree::Punct(p) if p.as_char() == ',') {
            parts.push(Vec::new());
        } else {
            parts.last_mut().unwrap().push(token.clone());
        }
        previous = Some(token);
    }
    parts.retain(|part| !part.is_empty());
    parts
}

/// The name a parameter binds: `x` in `x: T` or `mut x: T`.
fn binding(param: &[TokenTree]) -> Option<Ident> {
    match param {
        [TokenTree::Ident(name), TokenTree::Punct(colon), ..] if colon.as_char() == ':' => Some(name.clone()),
        [TokenTree::Ident(word), rest @ ..] if word.to_string() == "mut" => binding(rest),
        _ => None,
    }
}

/// The type and const parameters' names, in order, for a turbofish.
fn type_parameters(generics: &[TokenTree]) -> Vec<Ident> {
    let inner = generics.get(1..generics.len().saturating_sub(1)).unwrap_or_default();
    split_top_level(inner.iter().cloned().collect())
        .into_iter()
        .filter_map(|param| match param.as_slice() {
            [TokenTree::Punct(quote), ..] if quote.as_char() == '\'' => None,
            [TokenTree::Ident(word), TokenTree::Ident(name), ..] if word.to_string() == "const" => Some(name.clone()),
            [TokenTree::Ident(name), ..] => Some(name.clone()),
            _ => None,
        })
        .collect()
}

fn doc(text: &str) -> TokenStream {
    let literal = TokenTree::Literal(proc_macro::Literal::string(text));
    let inner: TokenStream =
        [TokenTree::Ident(Ident::new("doc", Span::call_site())), punct('='), literal].into_iter().collect();
    [punct('#'), TokenTree::Group(Group::new(Delimiter::Bracket, inner))].into_iter().collect()
}

fn punct(c: char) -> TokenTree {
    TokenTree::Punct(Punct::new(c, Spacing::Alone))
}

fn compile_error(message: &str, span: Span) -> TokenStream {
    let mut error: TokenStream = "::core::compile_error!".parse().unwrap();
    let literal = TokenTree::Literal(proc_macro::Literal::string(message));
    error.extend([TokenTree::Group(Group::new(Delimiter::Parenthesis, [literal].into_iter().collect()))]);
    error.extend([punct(';')]);
    error
        .into_iter()
        .map(|mut t| {
            t.set_span(span);
            t
        })
        .collect()
}
