// Package render turns an engine's statement templates into statements:
// SQL text with the engine's placeholders, and for each placeholder the
// value of a call's [Args] it takes. Engines write values as {{arg "name"}}
// (and scope conditions and key lists through {{scope}} and {{keys}}), so
// the order of a statement's arguments is read from its text and can never
// disagree with it; a name that is not one of [Args]' fails the render,
// when the store is built, not when the statement first runs.
//
// The package knows nothing of tables or engines: a [Style] says how an
// engine writes placeholders, key lists and durations, and the template
// data (quoted names, variant flags) is the caller's. It is not for users.
package render
