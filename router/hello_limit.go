package router

// HelloMaxFrameBytes is the largest hello (command 1) record that Decode can
// accept, as one ZMTP frame: the head prefix, the 1-byte topology kind, the
// 4-byte length and a union body bounded so that kind, length and body
// together fit descriptorEnvelopeBytes (ServiceAdmission.code). A hello
// carries no metadata (no flag is allowed) and no payload, so it is always
// exactly one frame.
//
// A transport uses it to bound what a connection that has not been admitted
// yet may make it buffer: anything larger cannot be a valid hello.
const HelloMaxFrameBytes = HeadPrefixLen + DescriptorEnvelopeBytes
