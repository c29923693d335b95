package dialect

import (
	"fmt"
	"math"
)

// NormalizeKey converts a key value a caller passed into the one form the
// library uses for a key column of kind: an int64 for [IDInt], a string for
// [IDText]. Any Go integer type is accepted for integer keys, as long as it
// fits an int64 (a uint64 above math.MaxInt64 is an error, never a silent
// wrap); a string or []byte for text keys. Every other value is an error
// wrapping [ErrInvalidConfig]. Keys are normalised once, where they enter
// the library, so that engines and batches compare them as equal values.
func NormalizeKey(kind IDKind, v any) (any, error) {
	if kind == IDText {
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		}
		return nil, fmt.Errorf("%w: key %v has type %T; want a string", ErrInvalidConfig, v, v)
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
			return nil, fmt.Errorf("%w: key %d overflows a 64-bit signed integer", ErrInvalidConfig, x)
		}
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return nil, fmt.Errorf("%w: key %d overflows a 64-bit signed integer", ErrInvalidConfig, x)
		}
		return int64(x), nil
	}
	return nil, fmt.Errorf("%w: key %v has type %T; want an integer", ErrInvalidConfig, v, v)
}
