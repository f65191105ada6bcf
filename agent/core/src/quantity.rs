//! Kubernetes resource quantities (`500m`, `64Mi`, `1.5G`, `2e3`), parsed exactly: a
//! quantity is kept as an integer mantissa times a power of ten times a power of two,
//! and converted with Kubernetes' rounding (up, to the nearest integer).

/// A non-negative quantity: `mantissa × 10^exp10 × 2^exp2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    mantissa: u128,
    exp10: i32,
    exp2: u32,
}

/// Why a quantity does not parse or convert.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("the number is missing")]
    NoNumber,
    #[error("negative quantities are not allowed here")]
    Negative,
    #[error("unknown suffix {0:?}; use one of n u m k M G T P E Ki Mi Gi Ti Pi Ei, or e<exponent>")]
    Suffix(String),
    #[error("the number is too large or too precise")]
    TooLarge,
}

/// The largest decimal exponent accepted (`1e1000` is not a resource anyone means).
const MAX_EXPONENT: i32 = 100;

impl Quantity {
    /// Parses `[+]<digits>[.<digits>]<suffix>`, as Kubernetes does (without the sign `-`,
    /// which no resource or size here may have).
    pub fn parse(text: &str) -> Result<Self, Error> {
        let unsigned = text.strip_prefix('+').unwrap_or(text);
        if unsigned.starts_with('-') {
            return Err(Error::Negative);
        }
        let number_len =
            unsigned.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(unsigned.len());
        let (number, suffix) = unsigned.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(Error::NoNumber);
        }
        let mut mantissa: u128 = 0;
        for digit in whole.bytes().chain(fraction.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(u128::from(digit - b'0')))
                .ok_or(Error::TooLarge)?;
        }
        let fraction_len = i32::try_from(fraction.len()).map_err(|_| Error::TooLarge)?;
        let (exp10, exp2) = suffix_exponents(suffix)?;
        Ok(Quantity { mantissa, exp10: exp10 - fraction_len, exp2 })
    }

    /// The quantity times `10^scale`, rounded up: `ceil_scaled(0)` is Kubernetes'
    /// `Value()`, `ceil_scaled(3)` its `MilliValue()`.
    pub fn ceil_scaled(&self, scale: i32) -> Result<u128, Error> {
        let scaled =
            self.mantissa.checked_shl(self.exp2).filter(|v| v >> self.exp2 == self.mantissa);
        let value = scaled.ok_or(Error::TooLarge)?;
        let exp = self.exp10 + scale;
        if exp >= 0 {
            let factor = 10u128.checked_pow(exp.unsigned_abs()).ok_or(Error::TooLarge)?;
            value.checked_mul(factor).ok_or(Error::TooLarge)
        } else {
            match 10u128.checked_pow(exp.unsigned_abs()) {
                Some(divisor) => Ok(value.div_ceil(divisor)),
                // Below 10^-38 of a unit: rounds up to one unit unless zero.
                None => Ok(u128::from(value > 0)),
            }
        }
    }

    /// The quantity rounded up to an integer, as an `i64` (saturating).
    pub fn value(&self) -> Result<i64, Error> {
        self.ceil_scaled(0).map(saturate)
    }

    /// The quantity in thousandths, rounded up, as an `i64` (saturating).
    pub fn milli_value(&self) -> Result<i64, Error> {
        self.ceil_scaled(3).map(saturate)
    }

    /// Whether the quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }
}

fn saturate(value: u128) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The powers of ten and two a suffix stands for.
fn suffix_exponents(suffix: &str) -> Result<(i32, u32), Error> {
    let binary = |exp2| Ok((0, exp2));
    let decimal = |exp10| Ok((exp10, 0));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let exponent = suffix
                .strip_prefix(['e', 'E'])
                .filter(|e| {
                    let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
                })
                .ok_or_else(|| Error::Suffix(suffix.to_owned()))?;
            let exponent: i32 = exponent.parse().map_err(|_| Error::TooLarge)?;
            if exponent.abs() > MAX_EXPONENT {
                return Err(Error::TooLarge);
            }
            decimal(exponent)
        }
    }
}

#[cfg(test)]
mod tests;
