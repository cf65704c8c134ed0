//! The macros that declare a gene as an enum: `categorical!` (alleles that serialize as
//! lowercase strings) and `numeric!` (alleles that serialize as integers), each with
//! its list of alleles, its labels and its conversions.

/// Declares an enum gene whose alleles serialize as lowercase strings.
macro_rules! categorical {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $label:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $label)] $variant),+
        }

        impl $name {
            /// Every allele, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The allele's name as written in genome TOML files.
            pub fn label(self) -> &'static str {
                match self { $($name::$variant => $label),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.label())
            }
        }
    };
}

/// Declares an enum gene whose alleles serialize as integers (tile sizes, counts).
macro_rules! numeric {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $value:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "u32", into = "u32")]
        pub enum $name {
            $($variant),+
        }

        impl $name {
            /// Every allele, smallest first.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The allele's numeric value.
            pub fn get(self) -> u32 {
                match self { $($name::$variant => $value),+ }
            }
        }

        impl TryFrom<u32> for $name {
            type Error = String;
            fn try_from(v: u32) -> Result<Self, String> {
                match v {
                    $($value => Ok($name::$variant),)+
                    other => Err(format!(
                        "{other} is not an allele of {}; expected one of {}",
                        stringify!($name),
                        [$($value.to_string()),+].join(", ")
                    )),
                }
            }
        }

        impl From<$name> for u32 {
            fn from(v: $name) -> u32 { v.get() }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.get())
            }
        }
    };
}
