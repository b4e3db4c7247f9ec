import { segmentIo } from "../../store/segment.ts";

/** Bytes read through the segment primitives while `fn` runs. */
export async function bytesRead<T>(fn: () => T | Promise<T>): Promise<{ value: T; bytes: number }> {
  const real = segmentIo.readSync;
  let bytes = 0;
  segmentIo.readSync = (fd, buf, off, len, pos) => {
    const n = real(fd, buf, off, len, pos);
    bytes += n;
    return n;
  };
  try {
    return { value: await fn(), bytes };
  } finally {
    segmentIo.readSync = real;
  }
}
