package credentials

// DocOf is a credential's document, for the external tests to tamper with.
var DocOf = (*Store).doc
