/**
 * HTTP/1.1 as the relay speaks it, strict on purpose: message heads and body framing
 * (`http1.ts`, RFC 9112), the `chunked` coding as a byte-at-a-time state machine
 * (`chunked.ts`), the buffered reader over one connection (`conn_reader.ts`) and the content
 * codings an upstream may use although asked not to (`decode.ts`). Pure but for the reader,
 * which reads the connection it is given.
 *
 * @module
 */
