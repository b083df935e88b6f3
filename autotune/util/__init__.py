"""The ground floor's small leaf utilities, which every floor may use: files written whole
(atomic_json), opened only where no one else could have changed them (checked_file), a folder
checked once and then used only through its descriptor, and a launch's messages in it, each with
the launch's token (checked_folder, channel), private to this user (private_files), locked
(file_lock); text made safe to show (clean); a process told apart from a later one on its pid
(process_identity); and the Python children autotune starts, none of which imports from the
current folder (child_python)."""
