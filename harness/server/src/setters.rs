//! The `setters!` macro: the builder setters of the options structs
//! ([`HttpOptions`](crate::http::HttpOptions), [`McpOptions`](crate::mcp::McpOptions),
//! [`GatewaySetup`](crate::http::GatewaySetup)).

/// Builder setters for options structs: `pub fn field(mut self, field: Type) -> Self`,
/// one per `field: Type`.
macro_rules! setters {
    ($($field:ident: $ty:ty),* $(,)?) => {
        $(
            #[doc = concat!("Sets [`Self::", stringify!($field), "`].")]
            pub fn $field(mut self, $field: $ty) -> Self {
                self.$field = $field;
                self
            }
        )*
    };
}
pub(crate) use setters;
