package transport

import (
	"encoding/binary"
	"fmt"

	"github.com/meshnode/meshnode/router/transport/curve"
)

// The CURVE data phase of a zconn: every ZMTP frame travels as one MESSAGE
// command whose box holds the frame's MORE/COMMAND flags and data. The
// outer frame is written as libzmq 4.3 writes it — a data frame with no
// flags (LONG when needed) — and read with or without the COMMAND flag,
// since RFC 25 calls MESSAGE a command; the outer MORE flag is never valid.

// scratchMax bounds the scratch buffers a connection keeps between frames.
const scratchMax = 64 << 10

// writeSealed seals one frame into the write buffer (writer goroutine).
func (c *zconn) writeSealed(flags byte, data []byte) error {
	var err error
	// Room for the longest frame header before the command, so header and
	// body go out in one Write.
	buf := append(c.wbuf[:0], 0, 0, 0, 0, 0, 0, 0, 0, 0)
	buf, err = c.sess.Seal(buf, flags, data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSecurity, err)
	}
	size := len(buf) - 9
	start := 7
	if size > 255 {
		start = 0
		buf[0] = flagLong
		binary.BigEndian.PutUint64(buf[1:9], uint64(size))
	} else {
		buf[7], buf[8] = 0, byte(size)
	}
	_, err = c.g.Write(buf[start:])
	if cap(buf) <= scratchMax {
		c.wbuf = buf
	} else {
		c.wbuf = nil
	}
	return err
}

// recvCurve returns the frames of the next message; ZMTP commands inside
// MESSAGE boxes (PING, PONG) are handled or skipped.
func (c *zconn) recvCurve() ([][]byte, error) {
	var frames [][]byte
	var total uint64
	for {
		body, err := c.g.readSealed(c.rbuf)
		if err != nil {
			return nil, err
		}
		if cap(body) <= scratchMax {
			c.rbuf = body
		}
		flags, data, err := c.sess.Open(nil, body)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSecurity, err)
		}
		if flags&curve.FlagCommand != 0 {
			if flags&curve.FlagMore != 0 || len(frames) > 0 {
				return nil, c.g.fail("command inside a multipart message")
			}
			if uint64(len(data)) > c.g.lim.maxCommand {
				return nil, c.g.fail("command of %d bytes (limit %d)", len(data), c.g.lim.maxCommand)
			}
			if ctx, ok := pingContext(data); ok && c.g.onPing != nil {
				c.g.onPing(ctx)
			}
			continue // PONG and other commands: not records
		}
		frames = append(frames, data)
		total += uint64(len(data))
		if len(frames) > c.g.lim.maxFrames {
			return nil, c.g.fail("more than %d frames in one message", c.g.lim.maxFrames)
		}
		if total > c.g.lim.maxMessage {
			return nil, c.g.fail("message of more than %d bytes", c.g.lim.maxMessage)
		}
		if flags&curve.FlagMore == 0 {
			return frames, nil
		}
	}
}
