package store

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"math"

	"github.com/claimlock/claimlock/dialect"
	"github.com/claimlock/claimlock/internal/ident"
)

// NormalizeKey converts a key value a caller passed into the one form the
// library uses for a key column of kind: an int64 for [dialect.IDInt], a string for
// [dialect.IDText]. Any Go integer type is accepted for integer keys, as long as it
// fits an int64 (a uint64 above math.MaxInt64 is an error, never a silent
// wrap); a string or []byte for text keys. Every other value is an error
// wrapping [dialect.ErrInvalidConfig]. Keys are normalised once, where they enter
// the library, so that engines and batches compare them as equal values.
func NormalizeKey(kind dialect.IDKind, v any) (any, error) {
	if kind == dialect.IDText {
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		}
		return nil, fmt.Errorf("%w: key %v has type %T; want a string", dialect.ErrInvalidConfig, v, v)
	}
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return nil, fmt.Errorf("%w: key %d overflows a 64-bit signed integer", dialect.ErrInvalidConfig, x)
		}
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return nil, fmt.Errorf("%w: key %d overflows a 64-bit signed integer", dialect.ErrInvalidConfig, x)
		}
		return int64(x), nil
	}
	return nil, fmt.Errorf("%w: key %v has type %T; want an integer", dialect.ErrInvalidConfig, v, v)
}

// TokenLen is the length of a token from [NewToken]: 26 characters, so it
// fits the VARCHAR(40) columns the design asks for, with room to spare.
const TokenLen = 26

var tokenEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewToken returns 128 random bits from crypto/rand as 26 base32 characters
// (A-Z, 2-7). Claims and lease acquisitions each take a fresh token; a token
// never encodes a host name or process id.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+: it crashes the program instead)
	return tokenEncoding.EncodeToString(b[:])
}

// MaxTokenLen is the shortest owner/token column claimlock accepts: tokens
// from [NewToken] are shorter, and the design fixes VARCHAR(40).
const MaxTokenLen = 40

// ValidateIdent checks a table name (schema.table allowed) with
// ident.Check, in an error wrapping [dialect.ErrInvalidConfig] naming
// field.
func ValidateIdent(field, name string) error {
	if err := ident.Check(name); err != nil {
		return fmt.Errorf("%w: %s: %v", dialect.ErrInvalidConfig, field, err)
	}
	return nil
}

// ValidateColumn is [ValidateIdent] for a column.
func ValidateColumn(field, name string) error {
	if err := ident.CheckColumn(name); err != nil {
		return fmt.Errorf("%w: %s: %v", dialect.ErrInvalidConfig, field, err)
	}
	return nil
}
