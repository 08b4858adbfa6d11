/// A clap value enum in the CLI for a library's plain enum of the same
/// variants, and its `From` into the library's (the orphan rule keeps clap's
/// derive off types of other crates, and the libraries carry no clap). The
/// variants' doc comments and `#[value(...)]` attributes are what `--help`
/// shows.
macro_rules! value_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident => $lib:ident {
            $( $(#[$vmeta:meta])* $variant:ident ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),*
        }

        impl From<$name> for $lib {
            fn from(v: $name) -> $lib {
                match v {
                    $( $name::$variant => $lib::$variant ),*
                }
            }
        }
    };
}
