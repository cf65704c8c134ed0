mkdir -p target/release; gunzip -c target/record/evo.gz > target/release/evo; chmod +x target/release/evo
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
# Run P0: the seed champion (before run S2) over the keys it would see split. Output: stdout.
G=genomes/champions/h100/b1-h8-l512-d64.toml
./target/release/evo bench $G --no-sdpa --problem 1,8,512,512,64,f16 --problem 1,16,512,256,64,f16 --problem 1,32,512,128,64,f16 --problem 1,8,512,256,64,f16 --problem 1,8,512,128,64,f16 2>&1 | tail -20
