#include "store/journal.h"

#include <algorithm>
#include <utility>

#include "store/crc32c.h"

namespace drover::store {
namespace {

void PutFixed32(uint32_t v, std::string* out) {
  char buf[4] = {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
                 static_cast<char>(v >> 24)};
  out->append(buf, 4);
}

uint32_t GetFixed32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{u[0]} | uint32_t{u[1]} << 8 | uint32_t{u[2]} << 16 | uint32_t{u[3]} << 24;
}

std::string TempPath(const std::string& path) { return path + ".compact"; }

// Parses whole records from the front of `data`; returns the length of the
// valid prefix.
uint64_t ParseRecords(std::string_view data, std::vector<std::string>* records) {
  // Counted first (lengths only), so the vector of a million records is
  // allocated once rather than grown and moved twenty times.
  size_t count = 0;
  for (uint64_t at = 0; data.size() - at >= Journal::kHeaderBytes;) {
    const uint32_t length = GetFixed32(data.data() + at);
    if (length > Journal::kMaxRecordBytes || data.size() - at - Journal::kHeaderBytes < length) {
      break;
    }
    ++count;
    at += Journal::kHeaderBytes + length;
  }
  records->reserve(records->size() + count);
  uint64_t pos = 0;
  while (data.size() - pos >= Journal::kHeaderBytes) {
    const char* header = data.data() + pos;
    uint32_t length = GetFixed32(header);
    uint32_t crc = GetFixed32(header + 4);
    if (length > Journal::kMaxRecordBytes) break;
    if (data.size() - pos - Journal::kHeaderBytes < length) break;
    std::string_view payload = data.substr(pos + Journal::kHeaderBytes, length);
    if (Crc32cExtend(Crc32c(std::string_view(header, 4)), payload) != crc) break;
    records->emplace_back(payload);
    pos += Journal::kHeaderBytes + length;
  }
  return pos;
}

}  // namespace

void Journal::EncodeRecord(std::string_view record, std::string* out) {
  EncodeRecord({}, record, out);
}

void Journal::EncodeRecord(std::string_view prefix, std::string_view record, std::string* out) {
  size_t start = out->size();
  PutFixed32(static_cast<uint32_t>(prefix.size() + record.size()), out);
  uint32_t crc = Crc32cExtend(Crc32c(std::string_view(out->data() + start, 4)), prefix);
  crc = Crc32cExtend(crc, record);
  PutFixed32(crc, out);
  out->append(prefix);
  out->append(record);
}

Result<std::unique_ptr<Journal>> Journal::Open(Env& env, std::string path, JournalReplay* replay) {
  *replay = JournalReplay{};
  const std::string dir = DirName(path);
  RETURN_IF_ERROR(env.CreateDirs(dir));
  // A leftover temporary file is a compaction that crashed before its
  // rename; the journal under `path` is the whole old one.
  if (env.Exists(TempPath(path))) RETURN_IF_ERROR(env.Remove(TempPath(path)));

  if (!env.Exists(path)) {
    ASSIGN_OR_RETURN(auto file, env.OpenAppendable(path));
    RETURN_IF_ERROR(env.SyncDir(dir));
    return std::unique_ptr<Journal>(new Journal(env, std::move(path), std::move(file), 0));
  }

  ASSIGN_OR_RETURN(std::string data, env.ReadFile(path));
  uint64_t valid = ParseRecords(data, &replay->records);
  replay->valid_bytes = valid;
  replay->discarded_bytes = data.size() - valid;
  ASSIGN_OR_RETURN(auto file, env.OpenAppendable(path));
  if (replay->discarded_bytes > 0) {
    // Cut the torn tail now, durably, so new records never follow garbage.
    RETURN_IF_ERROR(file->Truncate(valid));
    RETURN_IF_ERROR(file->Sync());
  }
  return std::unique_ptr<Journal>(new Journal(env, std::move(path), std::move(file), valid));
}

Journal::Journal(Env& env, std::string path, std::unique_ptr<WritableFile> file, uint64_t size)
    : env_(env), path_(std::move(path)), file_(std::move(file)), durable_bytes_(size) {}


void Journal::Break(const Status& status) {
  broken_ = status.WithContext("journal " + path_ + " is broken until reopened");
}

void Journal::Append(std::string_view record, DoneCallback done) {
  if (!broken_.ok()) {
    done(broken_);
    return;
  }
  if (record.size() > kMaxRecordBytes) {
    done(InvalidArgument("journal record of " + std::to_string(record.size()) +
                         " bytes exceeds the limit of " + std::to_string(kMaxRecordBytes)));
    return;
  }
  EncodeRecord(record, &pending_);
  pending_callbacks_.push_back(std::move(done));
}

Journal::~Journal() {
  // The owner is going away: finish the write, but run no callbacks.
  if (helper_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    helper_.join();
  }
}

void Journal::HelperLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || (job_flight_ != nullptr && !job_done_); });
    // A batch handed over is written even when stopping (the destructor
    // finishes the write in flight).
    if (job_flight_ == nullptr || job_done_) return;
    Flight* flight = job_flight_;
    WritableFile* file = job_file_;
    const uint64_t offset = job_offset_;
    std::function<void()> wake = job_wake_;
    lock.unlock();
    if (flight->compaction) {
      WriteCompaction(*flight);
    } else {
      WriteBatch(*file, offset, *flight);
    }
    // Done before `wake` runs, so the owner's reap never waits for this
    // thread (which, on a busy machine, may not run again for tens of
    // milliseconds). A wake-up may then meet a later batch, or none: the
    // owner reaps with ReapIfDone, which leaves a batch not done for its
    // own wake-up.
    lock.lock();
    job_done_ = true;
    cv_.notify_all();
    lock.unlock();
    wake();
    lock.lock();
  }
}

void Journal::WriteBatch(WritableFile& file, uint64_t offset, Flight& flight) {
  flight.status = file.Append(flight.batch);
  if (!flight.status.ok()) {
    // Cut the partial batch so the next batch does not follow garbage
    // (which replay would treat as the end of the journal).
    flight.cut_status = file.Truncate(offset);
    return;
  }
  flight.written = true;
  flight.status = file.Sync();
}

Status Journal::Sync() {
  again_ = false;  // this call writes everything buffered itself
  if (flight_) ReapBackground();
  std::string batch = std::move(pending_);
  std::vector<DoneCallback> callbacks = std::move(pending_callbacks_);
  pending_.clear();
  pending_callbacks_.clear();

  Status status = broken_;
  if (status.ok() && !batch.empty()) {
    status = file_->Append(batch);
    if (!status.ok()) {
      // Cut the partial batch so the next batch does not follow garbage
      // (which replay would treat as the end of the journal).
      Status cut = file_->Truncate(durable_bytes_);
      if (!cut.ok()) Break(cut);
    } else {
      status = file_->Sync();
      if (!status.ok()) {
        Break(status);
      } else {
        durable_bytes_ += batch.size();
      }
    }
  }
  for (auto& done : callbacks) done(status);
  return status;
}

void Journal::SyncInBackground(std::function<void()> wake) {
  wake_ = std::move(wake);
  if (flight_) {
    again_ = true;
    return;
  }
  if (!broken_.ok() || pending_.empty()) {
    (void)Sync();  // fails the callbacks at once, or has nothing to write
    return;
  }
  flight_ = std::make_unique<Flight>();
  flight_->batch = std::move(pending_);
  flight_->callbacks = std::move(pending_callbacks_);
  pending_.clear();
  pending_callbacks_.clear();
  Launch();
}

void Journal::Launch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_flight_ = flight_.get();
    job_file_ = file_.get();
    job_offset_ = durable_bytes_;
    job_wake_ = wake_;
    job_done_ = false;
  }
  if (!helper_.joinable()) {
    helper_ = std::thread([this] { HelperLoop(); });
  } else {
    cv_.notify_all();
  }
}

void Journal::ReapBackground() {
  if (!flight_) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return job_done_; });
    job_flight_ = nullptr;
    job_file_ = nullptr;
  }
  std::unique_ptr<Flight> flight = std::move(flight_);
  const Status& status = flight->status;
  if (flight->compaction) {
    flight->compact_done(FinishCompaction(*flight));
  } else if (!flight->cut_status.ok()) {
    Break(flight->cut_status);
  } else if (!status.ok() && flight->written) {
    Break(status);
  } else if (status.ok()) {
    durable_bytes_ += flight->batch.size();
  }
  for (auto& done : flight->callbacks) done(status);
  if (again_ && !flight_) {
    again_ = false;
    SyncInBackground(wake_);
  }
}

bool Journal::ReapIfDone() {
  if (!flight_) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!job_done_) return false;
  }
  ReapBackground();
  return true;
}

Status Journal::CheckSnapshot(const std::vector<std::string>& snapshot, size_t prefix_bytes,
                              size_t prefixed) {
  for (size_t i = 0; i < snapshot.size(); ++i) {
    const size_t size = snapshot[i].size() + (i < prefixed ? prefix_bytes : 0);
    if (size > kMaxRecordBytes) {
      return InvalidArgument("snapshot record of " + std::to_string(size) +
                             " bytes exceeds the journal's record limit");
    }
  }
  return Status::Ok();
}

void Journal::CompactInBackground(std::vector<std::string> snapshot, std::function<void()> wake,
                                  DoneCallback done) {
  CompactInBackground(std::move(snapshot), std::string(), 0, std::move(wake), std::move(done));
}

void Journal::CompactInBackground(std::vector<std::string> snapshot, std::string prefix,
                                  size_t prefixed, std::function<void()> wake, DoneCallback done) {
  if (Status checked = CheckSnapshot(snapshot, prefix.size(), prefixed); !checked.ok()) {
    return done(checked);
  }
  // Sync() reaps a batch in flight and writes what is buffered, so the
  // snapshot replaces a journal holding everything appended so far.
  if (Status synced = Sync(); !synced.ok()) return done(synced);
  while (flight_) ReapBackground();  // a callback of that sync started one
  wake_ = std::move(wake);
  flight_ = std::make_unique<Flight>();
  flight_->compaction = true;
  flight_->snapshot = std::move(snapshot);
  flight_->prefix = std::move(prefix);
  flight_->prefixed = std::min(prefixed, flight_->snapshot.size());
  flight_->compact_done = std::move(done);
  Launch();
}

void Journal::WriteCompaction(Flight& flight) {
  const std::string temp = TempPath(path_);
  std::string contents;
  size_t bytes = 0;
  for (const auto& record : flight.snapshot) bytes += kHeaderBytes + record.size();
  bytes += flight.prefixed * flight.prefix.size();
  contents.reserve(bytes);
  for (size_t i = 0; i < flight.snapshot.size(); ++i) {
    EncodeRecord(i < flight.prefixed ? std::string_view(flight.prefix) : std::string_view(),
                 flight.snapshot[i], &contents);
  }
  flight.snapshot = {};
  auto written = [&]() -> Result<std::unique_ptr<WritableFile>> {
    ASSIGN_OR_RETURN(auto file, env_.CreateTruncated(temp));
    RETURN_IF_ERROR(file->Append(contents));
    RETURN_IF_ERROR(file->Sync());
    return file;
  }();
  if (written.ok()) {
    Status renamed = env_.Rename(temp, path_);
    if (!renamed.ok()) written = renamed;
  }
  if (!written.ok()) {
    // The old journal is untouched and still open; drop the half-made copy.
    // A failure to remove it is harmless: Open() removes it too.
    (void)env_.Remove(temp);
    flight.status = written.status().WithContext("compacting journal " + path_);
    return;
  }
  flight.new_file = std::move(written).value();
  flight.new_bytes = contents.size();
  flight.dir_status = env_.SyncDir(DirName(path_));
}

Status Journal::FinishCompaction(Flight& flight) {
  // Before the rename the old journal is intact and in use. After it, the
  // open handle follows the file to its new name; until the rename is
  // durable a crash may bring back the old journal, and records appended to
  // the new one would be lost: an unsynced directory breaks the journal.
  if (!flight.new_file) return flight.status;
  file_ = std::move(flight.new_file);
  durable_bytes_ = flight.new_bytes;
  if (!flight.dir_status.ok()) {
    Break(flight.dir_status);
    return broken_;
  }
  return Status::Ok();
}

Status Journal::Compact(std::vector<std::string> snapshot) {
  RETURN_IF_ERROR(Sync());
  RETURN_IF_ERROR(CheckSnapshot(snapshot));
  Flight flight;
  flight.compaction = true;
  flight.snapshot = std::move(snapshot);
  WriteCompaction(flight);
  return FinishCompaction(flight);
}

}  // namespace drover::store
