// The `tensorboard.Event` and `tensorboard.Summary` messages (tensorboard/compat/proto/event.proto, summary.proto;
// proto3), only the fields a scalar event file needs, defined by reflection. Field numbers checked against
// tensorboard 2.21.0. Proto3 leaves zero-valued plain fields out (step 0, wall time 0) but always writes a set oneof
// member, so a simple_value of 0 is still on the wire: byte-for-byte what TensorBoard's Python writer produces.
import protobuf from 'protobufjs/light.js'

/** One scalar of one tag at one step; `wallTime` in seconds since the epoch (fractional). */
export interface ScalarPoint {
  tag: string
  step: number
  wallTime: number
  value: number
}

export const FILE_VERSION = 'brain.Event:2'

const ROOT = protobuf.Root.fromJSON({
  nested: {
    tensorboard: {
      nested: {
        Event: {
          edition: 'proto3',
          oneofs: { what: { oneof: ['file_version', 'summary'] } },
          fields: {
            wall_time: { type: 'double', id: 1 },
            step: { type: 'int64', id: 2 },
            file_version: { type: 'string', id: 3 },
            summary: { type: 'Summary', id: 5 },
          },
        },
        Summary: {
          edition: 'proto3',
          fields: { value: { rule: 'repeated', type: 'Value', id: 1 } },
          nested: {
            Value: {
              oneofs: { value: { oneof: ['simple_value'] } },
              fields: {
                tag: { type: 'string', id: 1 },
                simple_value: { type: 'float', id: 2 },
              },
            },
          },
        },
      },
    },
  },
})

const EVENT = ROOT.lookupType('tensorboard.Event')

/** An Event as read back: the file-version event has `fileVersion`, a scalar event one entry in `values`. */
export interface DecodedEvent {
  wallTime: number
  step: number
  fileVersion?: string
  values: { tag: string; value: number }[]
}

export function encodeFileVersionEvent(wallTime: number): Uint8Array {
  return EVENT.encode(EVENT.create({ wall_time: wallTime, step: 0, file_version: FILE_VERSION })).finish()
}

/** One Event with one Summary.Value; the value is stored as float32 (simple_value), the wall time as float64. */
export function encodeScalarEvent(point: ScalarPoint): Uint8Array {
  const summary = { value: [{ tag: point.tag, simple_value: point.value }] }
  return EVENT.encode(EVENT.create({ wall_time: point.wallTime, step: point.step, summary })).finish()
}

export function decodeEvent(bytes: Uint8Array): DecodedEvent {
  const event = EVENT.toObject(EVENT.decode(bytes), { longs: Number, defaults: true })
  const values = (event.summary?.value ?? []) as { tag: string; simple_value: number }[]
  return {
    wallTime: event.wall_time,
    step: event.step,
    ...(event.file_version ? { fileVersion: event.file_version } : {}),
    values: values.map((v) => ({ tag: v.tag, value: v.simple_value })),
  }
}
