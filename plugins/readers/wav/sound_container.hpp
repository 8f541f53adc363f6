// The containers the wav reader accepts, and the check that the data each declares is in the
// file. libsndfile reads a file whose header declares more audio than the file holds as the
// shorter recording that is there (it logs "should be" and reads on): a cut-off copy would pass
// as a shorter one, exit 0. Every container accepted here is parsed for its declared data and
// compared with the file's size before a frame is read.
#pragma once

#include <cstdint>
#include <string>

#include <sndfile.h>

namespace tally_wav {

/// "WAV (RIFF), RF64, W64, AIFF/AIFC, CAF, FLAC and AU": the containers the reader accepts.
extern const char* const kAcceptedContainers;

/// InputError "<what>: <file> ..." unless the file open on `fd` (a regular file of `file_size`
/// bytes, `info` as libsndfile opened it) is one of the accepted containers and holds the data
/// its header declares:
///   WAV (RIFF, RIFX, WAVEX)  the data chunk's size (0xffffffff: a stream to the end of the file)
///   RF64, BW64               the ds64 chunk's data size
///   W64                      the data chunk's 64-bit size
///   AIFF, AIFC               the SSND chunk's size, and COMM's frame count against the frames
///                            that SSND holds
///   CAF                      the data chunk's size (-1: to the end of the file), and pakt's
///                            count of valid frames
///   AU                       the header's data size (0xffffffff: to the end of the file)
///   FLAC                     STREAMINFO's total samples; a cut stream also fails to decode
/// Anything else libsndfile reads (Ogg, MP3, NIST, VOC, raw, ...) is refused naming its format:
/// it declares no length to check.
void check_declared_data(int fd, std::uint64_t file_size, const SF_INFO& info,
                         const std::string& file, const std::string& what);

}  // namespace tally_wav
