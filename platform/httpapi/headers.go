package httpapi

// APIKeyHeader carries an API key on every route and RPC. A browser that cannot set a header
// (an EventSource, a WebSocket) sends the key as the api_key query parameter instead, on the
// routes that only read.
const APIKeyHeader = "x-api-key"
